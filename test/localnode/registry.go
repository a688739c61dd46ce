package localnode

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// registryHostsDir is containerd's registry configuration directory
// (config_path): one directory per registry host holding a hosts.toml. It
// is in the state directory, so that teardown removes it with the rest.
func (c Config) registryHostsDir() string { return c.path("containerd", "certs.d") }

// TrustRegistry lets containerd pull from a plain-HTTP registry on
// loopback, host being 127.0.0.1:<port> or localhost:<port>: it writes the
// host's hosts.toml, which containerd reads at the next pull. Only a
// loopback address is accepted, since nothing on it crosses the network
// in the clear.
func TrustRegistry(c Config, host string) error {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		return fmt.Errorf("registry %q is not host:port: %w", host, err)
	}
	if ip := net.ParseIP(h); h != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("registry %q is not on loopback: only a loopback registry is trusted over plain HTTP", host)
	}
	dir := filepath.Join(c.registryHostsDir(), host)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(registryHosts(host)), 0o644); err != nil {
		return fmt.Errorf("write hosts.toml of %s: %w", host, err)
	}
	return nil
}

// registryHosts is the hosts.toml of a plain-HTTP registry: pull and
// resolve only, since the node never pushes.
func registryHosts(host string) string {
	return fmt.Sprintf(`server = "http://%[1]s"

[host."http://%[1]s"]
  capabilities = ["pull", "resolve"]
`, host)
}
