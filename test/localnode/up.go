package localnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/internal/images"
)

// Timings are how long each phase of Up took; they are printed, never
// asserted.
type Timings struct {
	Packages, Images, ControlPlane, NodeReady, DNSReady, Total time.Duration
	// NodeReadyFromStart is from the start of Up to the node's Ready.
	NodeReadyFromStart time.Duration
}

// Logf is how the harness reports progress.
type Logf func(format string, args ...any)

// Status says whether a node is up from this state directory.
func Status(c Config) (*State, bool, error) {
	s, err := loadState(c)
	if errors.Is(err, errNoState) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	up := s.Ready
	for _, p := range s.Procs {
		up = up && p.alive()
	}
	return s, up, nil
}

// Up starts the node and waits until it is Ready with cluster DNS. owner
// is recorded so that a tier tears down only a node it started. A node that
// is already up is reused; leftovers of a failed start are cleaned first.
// On error the caller must call Down (the state file says what to undo).
func Up(ctx context.Context, c Config, owner string, logf Logf) (Timings, error) {
	var t Timings
	start := time.Now()
	if os.Geteuid() != 0 {
		return t, fmt.Errorf("the local node needs root (containerd, kubelet, iptables, mounts)")
	}
	if s, up, err := Status(c); err != nil {
		return t, err
	} else if up {
		logf("node already up (started by %s); reusing it", s.Owner)
		return t, nil
	} else if s != nil {
		logf("cleaning up a node that did not finish starting or stopping")
		if err := Down(context.WithoutCancel(ctx), c, logf); err != nil {
			return t, fmt.Errorf("clean up previous node: %w", err)
		}
	}
	if err := EnsurePackages(logf); err != nil {
		return t, err
	}
	t.Packages = time.Since(start)
	s, err := recordHost(c, owner)
	if err != nil {
		return t, err
	}
	if err := upNode(ctx, c, s, start, &t, logf); err != nil {
		return t, err
	}
	s.Ready = true
	t.Total = time.Since(start)
	return t, s.save(c)
}

// recordHost saves the host facts and the node address before anything is
// changed, so that Down can restore them even if Up dies right after.
func recordHost(c Config, owner string) (*State, error) {
	if err := checkBinaries(c); err != nil {
		return nil, err
	}
	before, err := SnapshotFacts(c)
	if err != nil {
		return nil, err
	}
	if len(before.Procs) > 0 {
		return nil, fmt.Errorf("processes of a node from %s are running without a state file: %v", c.StateDir, before.Procs)
	}
	ip, err := NodeIP()
	if err != nil {
		return nil, err
	}
	s := &State{NodeIP: ip, Owner: owner, Before: before}
	s.Created = createdPaths(globalPaths, func(p string) bool { _, err := os.Lstat(p); return err == nil })
	return s, s.save(c)
}

var nodeBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "coredns"}

func checkBinaries(c Config) error {
	for _, name := range nodeBinaries {
		if _, err := os.Stat(c.bin(name)); err != nil {
			return fmt.Errorf("%s missing in %s (run `make tools`): %w", name, c.BinDir, err)
		}
	}
	// kubelet and kube-apiserver must be the pinned release: skew between
	// them, or a stale ./bin link, gives failures far from their cause.
	for _, name := range []string{"kube-apiserver", "kubelet"} {
		out, err := exec.Command(c.bin(name), "--version").Output()
		if err != nil {
			return fmt.Errorf("%s --version: %w", name, err)
		}
		if got := strings.TrimSpace(string(out)); got != "Kubernetes "+KubernetesVersion {
			return fmt.Errorf("%s reports %q, want Kubernetes %s (run `make tools`)", name, got, KubernetesVersion)
		}
	}
	return nil
}

func upNode(ctx context.Context, c Config, s *State, start time.Time, t *Timings, logf Logf) error {
	phase := time.Now()
	built, err := BuildImages(c, ImagePause, ImageCoreDNS)
	if err != nil {
		return err
	}
	s.Images = map[string]string{ImagePause: built[ImagePause].Ref, ImageCoreDNS: built[ImageCoreDNS].Ref}
	if err := writeFiles(c, s); err != nil {
		return err
	}
	t.Images = time.Since(phase)
	phase = time.Now()
	if err := guardServiceRange(c); err != nil {
		return err
	}
	if err := startControlPlane(ctx, c, s); err != nil {
		return err
	}
	t.ControlPlane = time.Since(phase)
	logf("control plane ready in %s", t.ControlPlane.Round(time.Millisecond))
	nodeStart := time.Now()
	if err := startNode(ctx, c, s, built, logf); err != nil {
		return err
	}
	cl, err := c.Client()
	if err != nil {
		return err
	}
	if err := WaitNodeReady(ctx, cl, c.NodeName, 2*time.Minute); err != nil {
		return err
	}
	t.NodeReady = time.Since(nodeStart)
	t.NodeReadyFromStart = time.Since(start)
	logf("node Ready %s after containerd and kubelet start, %s after up started",
		t.NodeReady.Round(time.Millisecond), t.NodeReadyFromStart.Round(time.Millisecond))
	return startAddons(ctx, c, s, cl, t, logf)
}

func startAddons(ctx context.Context, c Config, s *State, cl client.Client, t *Timings, logf Logf) error {
	phase := time.Now()
	objs, err := DecodeManifests([]byte(addonManifests(c, s.Images[ImageCoreDNS])))
	if err != nil {
		return err
	}
	if err := Apply(ctx, cl, objs); err != nil {
		return err
	}
	if err := WaitDeploymentReady(ctx, cl, client.ObjectKey{Namespace: "kube-system", Name: "coredns"}, 2*time.Minute); err != nil {
		return err
	}
	// A ready CoreDNS pod is not yet a working kube-dns Service: kube-proxy
	// rejects traffic to it until it has synced the endpoints.
	if err := waitClusterDNS(ctx, c, time.Minute); err != nil {
		return err
	}
	t.DNSReady = time.Since(phase)
	logf("CoreDNS ready in %s", t.DNSReady.Round(time.Millisecond))
	return nil
}

// launch starts one component and records it in the state file at once.
func launch(c Config, s *State, name string, exe string, args []string) error {
	p, err := startProc(name, exe, args, nil, c.LogPath(name))
	if err != nil {
		return err
	}
	s.Procs = append(s.Procs, p)
	return s.save(c)
}

func startControlPlane(ctx context.Context, c Config, s *State) error {
	if err := launch(c, s, "etcd", c.bin("etcd"), etcdArgs(c)); err != nil {
		return err
	}
	etcdHealth := fmt.Sprintf("http://127.0.0.1:%d/health", c.EtcdPort)
	if err := waitHTTP(ctx, etcdHealth, s, 30*time.Second); err != nil {
		return err
	}
	if err := os.MkdirAll(c.path("apiserver"), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(c.path("apiserver", "audit-policy.yaml"), []byte(auditPolicy), 0o600); err != nil {
		return err
	}
	if err := launch(c, s, "kube-apiserver", c.bin("kube-apiserver"), apiServerArgs(c, s.NodeIP)); err != nil {
		return err
	}
	if err := waitAPIServer(ctx, c, s, 60*time.Second); err != nil {
		return err
	}
	if err := launch(c, s, "kube-controller-manager", c.bin("kube-controller-manager"), controllerManagerArgs(c)); err != nil {
		return err
	}
	if err := startVolumePermissions(c, s); err != nil {
		return err
	}
	return launch(c, s, "kube-scheduler", c.bin("kube-scheduler"), schedulerArgs(c))
}

func startNode(ctx context.Context, c Config, s *State, built map[string]images.Built, logf Logf) error {
	if err := launch(c, s, "containerd", "/usr/bin/containerd", []string{"--config", c.path("containerd", "config.toml")}); err != nil {
		return err
	}
	if err := waitSocket(ctx, c.containerdSock(), s, 30*time.Second); err != nil {
		return err
	}
	if err := ImportImages(c, built, logf); err != nil {
		return err
	}
	if err := launch(c, s, "kubelet", c.bin("kubelet"), kubeletArgs(c, s.NodeIP)); err != nil {
		return err
	}
	return launch(c, s, "kube-proxy", c.bin("kube-proxy"), []string{"--config=" + c.path("kube-proxy-config.yaml")})
}

// errExited means a component died while the harness waited for it.
var errExited = errors.New("component exited")

func checkProcs(s *State) error {
	for _, p := range s.Procs {
		if !p.alive() {
			return fmt.Errorf("%s (pid %d): %w; see its log", p.Name, p.PID, errExited)
		}
	}
	return nil
}

func waitHTTP(ctx context.Context, url string, s *State, timeout time.Duration) error {
	return Poll(ctx, timeout, url, func(ctx context.Context) (bool, string, error) {
		if err := checkProcs(s); err != nil {
			return false, "", err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error(), nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status, nil
	})
}

func waitAPIServer(ctx context.Context, c Config, s *State, timeout time.Duration) error {
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create clientset: %w", err)
	}
	return Poll(ctx, timeout, "kube-apiserver /readyz", func(ctx context.Context) (bool, string, error) {
		if err := checkProcs(s); err != nil {
			return false, "", err
		}
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		return string(body) == "ok", string(body), nil
	})
}

func waitSocket(ctx context.Context, path string, s *State, timeout time.Duration) error {
	return Poll(ctx, timeout, path, func(ctx context.Context) (bool, string, error) {
		if err := checkProcs(s); err != nil {
			return false, "", err
		}
		conn, err := net.Dial("unix", path)
		if err != nil {
			return false, err.Error(), nil
		}
		conn.Close()
		return true, "", nil
	})
}

// writeFiles writes the PKI, kubeconfigs and component configurations.
func writeFiles(c Config, s *State) error {
	for _, dir := range []string{c.logDir(), c.path("kubeconfigs"), c.path("cni", "net.d"), c.path("containerd"), c.path("pod-logs")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	}
	if err := writePKI(c.pkiDir(), certRequests(c, net.ParseIP(s.NodeIP)), time.Now()); err != nil {
		return err
	}
	files := map[string]string{
		c.path("kubelet-config.yaml"):                   kubeletConfig(c, s.NodeIP),
		c.path("kube-proxy-config.yaml"):                kubeProxyConfig(c),
		c.path("containerd", "config.toml"):             containerdConfig(c, s.Images[ImagePause]),
		c.path("cni", "net.d", "10-localnode.conflist"): cniConflist(c),
		c.path("resolv.conf"):                           "# cluster DNS only: CoreDNS does not forward off the node\n",
	}
	for _, name := range []string{"admin", "controller-manager", "scheduler", "kubelet", "kube-proxy"} {
		data, err := kubeconfigFor(c, s.NodeIP, name)
		if err != nil {
			return err
		}
		path := c.componentKubeconfig(name)
		if name == "admin" {
			path = c.Kubeconfig()
		}
		files[path] = string(data)
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return fmt.Errorf("write %s: %w", filepath.Base(path), err)
		}
	}
	return nil
}

// waitClusterDNS waits until the kubernetes Service's name resolves through
// the kube-dns ClusterIP from this host.
func waitClusterDNS(ctx context.Context, c Config, timeout time.Duration) error {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(c.DNSIP, "53"))
	}}
	return Poll(ctx, timeout, "cluster DNS at "+c.DNSIP, func(ctx context.Context) (bool, string, error) {
		lookupCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		addrs, err := r.LookupHost(lookupCtx, "kubernetes.default.svc.cluster.local")
		if err != nil {
			return false, err.Error(), nil
		}
		return len(addrs) == 1 && addrs[0] == c.APIServerIP, fmt.Sprint(addrs), nil
	})
}

// hostPathPVDir is where kube-controller-manager's host-path provisioner
// creates volumes (its default, which no flag changes).
const hostPathPVDir = "/tmp/hostpath_pv"

// startVolumePermissions builds and starts volperms, which makes provisioned
// volumes writable by non-root pods as a real storage driver would.
func startVolumePermissions(c Config, s *State) error {
	bin := c.path("volperms")
	if err := images.GoBuild(c.RepoRoot, "./test/localnode/volperms", bin); err != nil {
		return fmt.Errorf("build volperms: %w", err)
	}
	return launch(c, s, "volperms", bin, []string{hostPathPVDir})
}
