// Package gcstest runs fake-gcs-server (built by `make tools`) on loopback
// with one bucket, over plain HTTP, for the GCS store's tests.
package gcstest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/test/emulator"
	"github.com/openbao/operator/test/freeport"
	"github.com/openbao/operator/test/testbin"
)

// Server is one running fake-gcs-server.
type Server struct {
	// Endpoint is http://127.0.0.1:PORT, the store's endpoint.
	Endpoint string
	Bucket   string
	*emulator.Process
}

// Start starts the emulator with the bucket "backups" and stops it at the
// test's end.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := testbin.Path("fake-gcs-server")
	if err != nil {
		t.Fatal(err)
	}
	port, err := freeport.Get("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), Bucket: "backups"}
	// external-url is where resumable uploads continue; without it the
	// emulator names a host of its own.
	args := []string{"-scheme", "http", "-host", "127.0.0.1", "-port", fmt.Sprint(port), "-backend", "memory",
		"-external-url", s.Endpoint, "-public-host", fmt.Sprintf("127.0.0.1:%d", port), "-log-level", "warn"}
	s.Process, err = emulator.Start(bin, args, nil, s.makeBucket, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// makeBucket creates the bucket through the JSON API; it fails until the
// emulator answers.
func (s *Server) makeBucket(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Endpoint+"/storage/v1/b?project=test",
		strings.NewReader(`{"name":"`+s.Bucket+`"}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusConflict {
		return fmt.Errorf("create bucket: HTTP %d", resp.StatusCode)
	}
	return nil
}
