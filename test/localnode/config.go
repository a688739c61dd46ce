// Package localnode runs a real single-node Kubernetes cluster on this
// machine from the pinned binaries in ./bin and Debian's containerd, runc
// and CNI plugins, for the end-to-end tests and `make demo`.
//
// Everything it creates lives under one state directory, except what the
// components keep in fixed global paths; a state file written during Up
// records every process, sysctl and global path it touched so that Down
// restores the host also after a crash or an interrupt.
package localnode

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/openbao/operator/test/testbin"
)

// KubernetesVersion is the version of the control-plane and node binaries
// that test/tools/build.sh builds; Up refuses binaries that report another.
const KubernetesVersion = "v1.33.13"

// StateDirEnv overrides the state directory.
const StateDirEnv = "OPENBAO_LOCALNODE_DIR"

// Config is where the node keeps its state and how its networks are laid
// out. The addresses are fixed so that a second node on the same machine is
// refused instead of half-working.
type Config struct {
	StateDir    string
	BinDir      string // kube-apiserver, kubelet, etcd, ... (make tools)
	RepoRoot    string
	ImageCache  string // image tarballs, kept across Down for fast rebuilds
	NodeName    string
	ClusterCIDR string // pod network of the cluster
	PodCIDR     string // this node's share, given to the bridge plugin
	ServiceCIDR string
	APIServerIP string // first address of ServiceCIDR: the kubernetes Service
	DNSIP       string
	APIPort     int
	EtcdPort    int
	EtcdPeer    int
	Bridge      string
}

// DefaultConfig returns the configuration for this checkout: state under
// $OPENBAO_LOCALNODE_DIR or $OPENBAO_OPERATOR_CACHE/localnode
// (default $HOME/.cache/openbao-operator/localnode), never inside the clone.
func DefaultConfig() (Config, error) {
	root, err := testbin.RepoRoot()
	if err != nil {
		return Config{}, err
	}
	bin, err := testbin.Dir()
	if err != nil {
		return Config{}, err
	}
	cache := os.Getenv("OPENBAO_OPERATOR_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return Config{}, fmt.Errorf("find home directory: %w", err)
		}
		cache = filepath.Join(home, ".cache", "openbao-operator")
	}
	state := os.Getenv(StateDirEnv)
	if state == "" {
		state = filepath.Join(cache, "localnode")
	}
	return Config{
		StateDir:    state,
		BinDir:      bin,
		RepoRoot:    root,
		ImageCache:  filepath.Join(cache, "images"),
		NodeName:    "localnode",
		ClusterCIDR: "10.244.0.0/16",
		PodCIDR:     "10.244.0.0/24",
		ServiceCIDR: "10.96.0.0/16",
		APIServerIP: "10.96.0.1",
		DNSIP:       "10.96.0.10",
		APIPort:     6443,
		EtcdPort:    12379,
		EtcdPeer:    12380,
		Bridge:      "cni0",
	}, nil
}

// Paths inside the state directory.
func (c Config) path(elem ...string) string {
	return filepath.Join(append([]string{c.StateDir}, elem...)...)
}

// Kubeconfig is the administrator's kubeconfig (group system:masters).
func (c Config) Kubeconfig() string { return c.path("kubeconfig") }

func (c Config) statePath() string      { return c.path("state.json") }
func (c Config) pkiDir() string         { return c.path("pki") }
func (c Config) logDir() string         { return c.path("logs") }
func (c Config) containerdSock() string { return c.path("containerd", "containerd.sock") }
func (c Config) bin(name string) string { return filepath.Join(c.BinDir, name) }

// LogPath is the log file of one component (etcd, kube-apiserver, ...).
func (c Config) LogPath(component string) string {
	return filepath.Join(c.logDir(), component+".log")
}
