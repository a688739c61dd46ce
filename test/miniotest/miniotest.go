// Package miniotest runs a real MinIO server (built by `make tools`, never
// linked: it is AGPL) as a separate process for tests, with fresh random
// credentials and a bucket, and stops it by the PID it started.
package miniotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/openbao/operator/test/freeport"
	"github.com/openbao/operator/test/testbin"
)

// Server is one running MinIO.
type Server struct {
	// Endpoint is http://ADDRESS:PORT.
	Endpoint  string
	Address   string // host:port
	AccessKey string
	SecretKey string
	Bucket    string
	Dir       string
	LogPath   string
	// Client is an admin client of the server, for the tests' own checks.
	Client *minio.Client
	cmd    *exec.Cmd
	exited chan error
}

// Options say where MinIO listens.
type Options struct {
	// Host to listen on; empty is 127.0.0.1.
	Host string
	// Port; zero picks a free one.
	Port int
}

// Start starts MinIO on loopback with a bucket and stops it at the test's end.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := StartWith(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartWith starts MinIO as told; the caller stops it.
func StartWith(opts Options) (*Server, error) {
	bin, err := testbin.Path("minio")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "miniotest-")
	if err != nil {
		return nil, err
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Port == 0 {
		if opts.Port, err = freeport.Get(opts.Host); err != nil {
			return nil, err
		}
	}
	s := &Server{
		Address: net.JoinHostPort(opts.Host, fmt.Sprint(opts.Port)), Dir: dir,
		AccessKey: "minio-" + randomHex(6), SecretKey: randomHex(20), Bucket: "backups",
		LogPath: filepath.Join(dir, "minio.log"),
	}
	s.Endpoint = "http://" + s.Address
	if err := s.start(bin); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(bin string) error {
	logFile, err := os.Create(s.LogPath)
	if err != nil {
		return err
	}
	s.cmd = exec.Command(bin, "server", "--quiet", "--address", s.Address, filepath.Join(s.Dir, "data"))
	s.cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+s.AccessKey, "MINIO_ROOT_PASSWORD="+s.SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "HOME="+s.Dir)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start minio: %w", err)
	}
	s.exited = make(chan error, 1)
	go func() { s.exited <- s.cmd.Wait(); logFile.Close() }()
	s.Client, err = minio.New(s.Address, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, "")})
	if err != nil {
		return err
	}
	return s.waitAndMakeBucket(30 * time.Second)
}

func (s *Server) waitAndMakeBucket(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		err := s.Client.MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{})
		if err == nil || minio.ToErrorResponse(err).Code == "BucketAlreadyOwnedByYou" {
			return nil
		}
		select {
		case err := <-s.exited:
			s.exited <- err
			data, _ := os.ReadFile(s.LogPath)
			return fmt.Errorf("minio exited: %v\n%s", err, data)
		case <-ctx.Done():
			return fmt.Errorf("minio at %s not ready within %s: %v", s.Address, timeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop ends the process it started (SIGTERM, then SIGKILL after ten
// seconds) and removes its data.
func (s *Server) Stop() {
	s.Kill()
	_ = os.RemoveAll(s.Dir)
}

// Kill ends the process but keeps its data, for Restart.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

// Restart starts the process again on the same address and data.
func (s *Server) Restart() error {
	bin, err := testbin.Path("minio")
	if err != nil {
		return err
	}
	return s.start(bin)
}

// Ready says whether the server answers.
func (s *Server) Ready() bool {
	resp, err := http.Get(s.Endpoint + "/minio/health/live")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
