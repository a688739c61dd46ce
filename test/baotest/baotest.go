// Package baotest runs real OpenBao server processes on loopback for tests.
// Each server gets its own directory, free ports and a log file, and is
// stopped (by the PID it started) when the test ends.
package baotest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openbao/operator/test/freeport"
	"github.com/openbao/operator/test/testbin"
)

// Server is one running bao process.
type Server struct {
	Dir         string // data, config and log live here
	Addr        string // API address, http://HOST:PORT (https with Options.CACert or TLS)
	ClusterAddr string // Raft cluster address, https://HOST:PORT
	// Ports holds the free port given to each of Options.Ports.
	Ports   map[string]int
	LogPath string
	// Client reaches the API; with Options.CACert it trusts that CA.
	Client *http.Client
	cmd    *exec.Cmd
	exited chan error
	argv   []string
	env    []string
}

// Options describe the server to start. Config, when set, replaces the
// default single-node configuration; it and Env may use the placeholders
// {{dir}}, {{host}}, {{api_port}}, {{cluster_port}}, {{node_id}} and those
// of Ports.
type Options struct {
	NodeID string
	Config string
	// Host is the loopback address the server listens on; empty means
	// 127.0.0.1. A Config of its own must listen there too ({{host}}).
	Host string
	// APIPort and ClusterPort fix the ports (for example 8200 and 8201, as
	// in a pod); zero picks free ones.
	APIPort, ClusterPort int
	// Ports names further placeholders, each replaced by a free port (for
	// example "acme_port" for {{acme_port}}), for listeners besides the one
	// Addr reaches.
	Ports []string
	// Files are written into the server's directory before it starts
	// (name relative to {{dir}}, directories created), for example TLS
	// certificates.
	Files map[string][]byte
	// Env is added to the server's environment, for example BAO_API_ADDR.
	Env []string
	// CACert, when set, says the configuration serves the API over TLS with
	// a certificate for 127.0.0.1 signed by this PEM CA.
	CACert []byte
	// TLS says the API serves HTTPS with a certificate the test checks
	// itself; Client then skips verification and serves readiness only.
	TLS bool
	// Wrapper, when set, is a command line run in front of bao: the process
	// started is Wrapper followed by `bao server -config=...`, as the
	// bao-wrapper runs it in a pod (for example {path, "-watch", f, "--"}).
	Wrapper []string
}

// defaultConfig is a single Raft node with a static seal over plain HTTP on
// loopback: the smallest configuration that initializes without key shares.
const defaultConfig = `
ui            = false
disable_mlock = true
api_addr      = "http://{{host}}:{{api_port}}"
cluster_addr  = "https://{{host}}:{{cluster_port}}"

storage "raft" {
  path    = "{{dir}}/raft"
  node_id = "{{node_id}}"
}

listener "tcp" {
  address         = "{{host}}:{{api_port}}"
  cluster_address = "{{host}}:{{cluster_port}}"
  tls_disable     = true
}

seal "static" {
  current_key_id = "test-1"
  current_key    = "file://{{dir}}/unseal.key"
}
`

// Start writes the configuration and a fresh 32-byte static unseal key, starts
// `bao server` and waits until its API answers.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	bao, err := testbin.Path("bao")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "raft"), 0o700); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string][]byte{"unseal.key": key})
	host := opts.Host
	if host == "" {
		host = "127.0.0.1"
	}
	if opts.NodeID == "" {
		opts.NodeID = "node-0"
	}
	if opts.Config == "" {
		opts.Config = defaultConfig
	}
	apiPort, clusterPort, ports, placeholders := placeholdersFor(t, opts, dir, host)
	configPath := filepath.Join(dir, "config.hcl")
	writeFiles(t, dir, map[string][]byte{"config.hcl": []byte(placeholders.Replace(opts.Config))})
	writeFiles(t, dir, opts.Files)
	s := &Server{
		Dir:         dir,
		Addr:        fmt.Sprintf("http://%s", net.JoinHostPort(host, fmt.Sprint(apiPort))),
		ClusterAddr: fmt.Sprintf("https://%s", net.JoinHostPort(host, fmt.Sprint(clusterPort))),
		Ports:       ports,
		LogPath:     filepath.Join(dir, "bao.log"),
		Client:      &http.Client{Timeout: 30 * time.Second},
	}
	switch {
	case opts.CACert != nil:
		s.Addr = strings.Replace(s.Addr, "http://", "https://", 1)
		s.Client = tlsClient(t, opts.CACert)
	case opts.TLS:
		s.Addr = strings.Replace(s.Addr, "http://", "https://", 1)
		s.Client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // readiness only; tests check certificates
		}}
	}
	env := make([]string, 0, len(opts.Env))
	for _, e := range opts.Env {
		env = append(env, placeholders.Replace(e))
	}
	argv := append(append([]string{}, opts.Wrapper...), bao, "server", "-config="+configPath)
	s.start(t, argv, env)
	return s
}

// placeholdersFor picks the ports opts leaves free and returns them with
// the replacer of every placeholder Config and Env may use.
func placeholdersFor(t testing.TB, opts Options, dir, host string) (apiPort, clusterPort int, ports map[string]int, r *strings.Replacer) {
	t.Helper()
	apiPort, clusterPort = opts.APIPort, opts.ClusterPort
	if apiPort == 0 {
		apiPort = freePort(t, host)
	}
	if clusterPort == 0 {
		clusterPort = freePort(t, host)
	}
	pairs := []string{
		"{{dir}}", dir,
		"{{host}}", host,
		"{{api_port}}", fmt.Sprint(apiPort),
		"{{cluster_port}}", fmt.Sprint(clusterPort),
		"{{node_id}}", opts.NodeID,
	}
	ports = map[string]int{}
	for _, name := range opts.Ports {
		ports[name] = freePort(t, host)
		pairs = append(pairs, "{{"+name+"}}", fmt.Sprint(ports[name]))
	}
	return apiPort, clusterPort, ports, strings.NewReplacer(pairs...)
}

// writeFiles writes each file under dir, creating its directories.
func writeFiles(t testing.TB, dir string, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func tlsClient(t testing.TB, caPEM []byte) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("baotest: Options.CACert holds no PEM certificate")
	}
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
}

// Restart stops the process and starts it again with the same command
// line, environment, directory and ports, then waits until its API answers.
// The log file is appended to.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop(t)
	s.start(t, s.argv, s.env)
}

func (s *Server) start(t testing.TB, argv []string, env []string) {
	t.Helper()
	s.argv, s.env = argv, env
	logFile, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(argv[0], argv[1:]...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.Env = append(append(os.Environ(), "BAO_LOG_LEVEL=info"), env...)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", argv[0], err)
	}
	s.exited = make(chan error, 1)
	go func() { s.exited <- s.cmd.Wait(); logFile.Close() }()
	t.Cleanup(func() { s.Stop(t) })
	if err := s.waitForAPI(30 * time.Second); err != nil {
		t.Fatalf("bao at %s: %v\n--- log ---\n%s", s.Addr, err, s.Log())
	}
}

// waitForAPI polls the health endpoint until the server answers with any
// HTTP status, or the process exits, or the timeout passes.
func (s *Server) waitForAPI(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Addr+"/v1/sys/health", nil)
		if resp, err := s.Client.Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case err := <-s.exited:
			s.exited <- err
			return fmt.Errorf("process exited before answering: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("no answer within %s", timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM to the process it started and waits for it to exit,
// killing it after ten seconds.
func (s *Server) Stop(t testing.TB) {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.exited:
		s.exited <- err
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		t.Logf("bao pid %d did not stop on SIGTERM; killed", s.cmd.Process.Pid)
		s.exited <- <-s.exited
	}
}

// PID is the process started: bao, or the wrapper when Options.Wrapper is set.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Log returns what the server wrote so far.
func (s *Server) Log() string {
	data, _ := os.ReadFile(s.LogPath)
	return string(data)
}

func freePort(t testing.TB, host string) int {
	t.Helper()
	port, err := freeport.Get(host)
	if err != nil {
		t.Fatal(err)
	}
	return port
}
