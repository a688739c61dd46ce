package localnode

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
)

// debianPackages are installed with apt-get when one of the files they
// provide is missing.
var debianPackages = map[string]string{
	"/usr/bin/containerd": "containerd",
	"/usr/bin/ctr":        "containerd",
	"/usr/sbin/runc":      "runc",
	"/usr/lib/cni/bridge": "containernetworking-plugins",
	"/usr/sbin/iptables":  "iptables",
	"/usr/sbin/conntrack": "conntrack",
}

// missingPackages is the pure decision: which packages provide a missing file.
func missingPackages(exists func(string) bool) []string {
	seen := map[string]bool{}
	var out []string
	for _, file := range sortedKeysOf(debianPackages) {
		pkg := debianPackages[file]
		if !exists(file) && !seen[pkg] {
			seen[pkg] = true
			out = append(out, pkg)
		}
	}
	return out
}

func sortedKeysOf(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return sortedStrings(keys)
}

// EnsurePackages installs containerd, runc, the CNI plugins, iptables and
// conntrack from Debian when missing (apt-get update once, first). It is a
// no-op when everything is there.
func EnsurePackages(logf func(string, ...any)) error {
	pkgs := missingPackages(func(p string) bool { _, err := os.Stat(p); return err == nil })
	if len(pkgs) == 0 {
		return nil
	}
	logf("installing from Debian: %s", strings.Join(pkgs, " "))
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	update := exec.Command("apt-get", "update", "-q")
	update.Env = env
	if out, err := update.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get update: %w\n%s", err, out)
	}
	args := append([]string{"install", "-y", "-q", "--no-install-recommends"}, pkgs...)
	install := exec.Command("apt-get", args...)
	install.Env = env
	if out, err := install.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get install %s: %w\n%s", strings.Join(pkgs, " "), err, out)
	}
	return nil
}

// NodeIP returns the IPv4 address of the interface that carries the default
// route: the API server binds there and pods reach it through the
// kubernetes Service. No traffic is sent anywhere by choosing it.
func NodeIP() (string, error) {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return "", fmt.Errorf("read routes: %w", err)
	}
	defer f.Close()
	iface := defaultRouteInterface(bufio.NewScanner(f))
	if iface == "" {
		return "", fmt.Errorf("no default route: the node needs an interface address to bind the API server")
	}
	link, err := net.InterfaceByName(iface)
	if err != nil {
		return "", fmt.Errorf("find interface %s: %w", iface, err)
	}
	addrs, err := link.Addrs()
	if err != nil {
		return "", fmt.Errorf("list addresses of %s: %w", iface, err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String(), nil
		}
	}
	return "", fmt.Errorf("interface %s has no IPv4 address", iface)
}

// defaultRouteInterface reads /proc/net/route (destination 00000000).
func defaultRouteInterface(sc *bufio.Scanner) string {
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 2 && f[1] == "00000000" {
			return f[0]
		}
	}
	return ""
}
