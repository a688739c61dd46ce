// Package azuritetest runs Azurite's blob service (installed from npm by
// `make tools`) on loopback with a fresh account and a container, for the
// Azure store's tests. Where node and npm could not be installed the
// tests skip, saying so.
package azuritetest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/openbao/operator/test/emulator"
	"github.com/openbao/operator/test/freeport"
	"github.com/openbao/operator/test/testbin"
)

// Server is one running Azurite.
type Server struct {
	// Endpoint is http://127.0.0.1:PORT; the account is in the path
	// (path style).
	Endpoint    string
	AccountName string
	AccountKey  string
	Container   string
	*emulator.Process
}

// Start starts Azurite with a container and stops it at the test's end;
// it skips the test when Azurite is not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := testbin.Path("azurite-blob")
	if err != nil {
		t.Skipf("SKIP: Azurite is not installed (make tools installs it from npm, with node and npm from apt when missing): %v", err)
	}
	port, err := freeport.Get("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 64)
	_, _ = rand.Read(key)
	s := &Server{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), AccountName: "backupacct",
		AccountKey: base64.StdEncoding.EncodeToString(key), Container: "backups"}
	args := []string{"--blobHost", "127.0.0.1", "--blobPort", fmt.Sprint(port),
		"--inMemoryPersistence", "--skipApiVersionCheck", "--disableTelemetry", "--silent"}
	env := []string{"AZURITE_ACCOUNTS=" + s.AccountName + ":" + s.AccountKey}
	s.Process, err = emulator.Start(bin, args, env, s.makeContainer, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// ContainerURL is the container's URL, path style.
func (s *Server) ContainerURL() string {
	return s.Endpoint + "/" + s.AccountName + "/" + s.Container
}

// SASToken is a SAS token of the container (read, write, list and
// delete, for an hour), without the leading "?".
func (s *Server) SASToken(t testing.TB) string {
	t.Helper()
	c, err := s.adminClient()
	if err != nil {
		t.Fatal(err)
	}
	perms := sas.ContainerPermissions{Read: true, Add: true, Create: true, Write: true, Delete: true, List: true}
	u, err := c.GetSASURL(perms, time.Now().Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, token, _ := strings.Cut(u, "?")
	return token
}

func (s *Server) adminClient() (*container.Client, error) {
	cred, err := container.NewSharedKeyCredential(s.AccountName, s.AccountKey)
	if err != nil {
		return nil, err
	}
	return container.NewClientWithSharedKeyCredential(s.ContainerURL(), cred,
		&container.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: http.DefaultClient}})
}

func (s *Server) makeContainer(ctx context.Context) error {
	c, err := s.adminClient()
	if err != nil {
		return err
	}
	_, err = c.Create(ctx, nil)
	if err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		return err
	}
	return nil
}
