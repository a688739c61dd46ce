package localnode

import (
	"bufio"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestIptablesCleanupDeletesOnlyNewOwnedRulesAndChains(t *testing.T) {
	before := []string{
		"iptables filter -N DOCKER",
		"iptables filter -A INPUT -j DOCKER",
	}
	now := append(before,
		"iptables nat -N KUBE-SERVICES",
		`iptables nat -A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
		"iptables nat -A KUBE-SERVICES -d 10.96.0.1/32 -j KUBE-SVC-X",
		"iptables filter -A INPUT -s 10.0.0.0/8 -j ACCEPT",
		"ip6tables filter -N KUBE-FIREWALL",
	)
	want := [][]string{
		{"iptables", "-w", "-t", "nat", "-D", "OUTPUT", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES"},
		{"iptables", "-w", "-t", "nat", "-F", "KUBE-SERVICES"},
		{"ip6tables", "-w", "-t", "filter", "-F", "KUBE-FIREWALL"},
		{"iptables", "-w", "-t", "nat", "-X", "KUBE-SERVICES"},
		{"ip6tables", "-w", "-t", "filter", "-X", "KUBE-FIREWALL"},
	}
	if got := iptablesCleanup(before, now); !reflect.DeepEqual(got, want) {
		t.Errorf("iptablesCleanup:\n got %q\nwant %q", got, want)
	}
}

func TestSplitRuleKeepsQuotedArgumentsTogether(t *testing.T) {
	got := splitRule(`-A X -m comment --comment "a \"b\" c" -j Y`)
	want := []string{"-A", "X", "-m", "comment", "--comment", `a "b" c`, "-j", "Y"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("splitRule = %q, want %q", got, want)
	}
}

func TestMountsToRemoveTakesNewMountsUnderRootsDeepestFirst(t *testing.T) {
	before := []string{"/", "/proc", "/run/netns"}
	now := []string{"/", "/proc", "/run/netns", "/state/kubelet/pods/a/volumes/x", "/state/c", "/run/netns/cni-1", "/other", "/statex"}
	got := mountsToRemove(before, now, []string{"/state", "/run/netns"})
	want := []string{"/state/kubelet/pods/a/volumes/x", "/run/netns/cni-1", "/state/c"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mountsToRemove = %q, want %q", got, want)
	}
}

func TestCreatedPathsReturnsTopmostMissingAncestor(t *testing.T) {
	existing := map[string]bool{"/var": true, "/var/lib": true, "/run": true, "/tmp": true, "/var/log": true, "/var/log/pods": true}
	exists := func(p string) bool { return existing[p] }
	got := createdPaths([]string{"/var/lib/kubelet/device-plugins", "/var/lib/kubelet", "/run/containerd/s", "/var/log/pods", "/tmp/hostpath_pv"}, exists)
	want := []string{"/var/lib/kubelet", "/run/containerd", "/tmp/hostpath_pv"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("createdPaths = %q, want %q", got, want)
	}
}

func TestDiffFactsNamesEveryChange(t *testing.T) {
	before := Facts{Sysctls: map[string]string{"kernel.panic": "1"}, Paths: map[string]bool{"/run/netns": false}, Links: []string{"lo", "eth0"}}
	after := Facts{Sysctls: map[string]string{"kernel.panic": "10"}, Paths: map[string]bool{"/run/netns": true}, Links: []string{"lo", "eth0", "cni0"}, Procs: []string{"42 /usr/bin/containerd-shim"}}
	got := strings.Join(DiffFacts(before, after), "\n")
	for _, want := range []string{`sysctl kernel.panic: "1" before, "10" after`, "path /run/netns: exists false before, true after", "link added: cni0", "process added: 42"} {
		if !strings.Contains(got, want) {
			t.Errorf("diff lacks %q:\n%s", want, got)
		}
	}
	if d := DiffFacts(before, before); len(d) != 0 {
		t.Errorf("diff of equal facts = %q, want none", d)
	}
}

func TestParseStatReadsStateAndStartTimeAfterCommandName(t *testing.T) {
	stat := "1234 (kube (x) y) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 12 0 98765 1000 100"
	state, start, err := parseStat(stat)
	if err != nil || state != 'S' || start != 98765 {
		t.Errorf("parseStat = %c, %d, %v; want S, 98765, nil", state, start, err)
	}
}

func TestMissingPackagesListsEachPackageOnce(t *testing.T) {
	got := missingPackages(func(p string) bool { return p == "/usr/sbin/runc" })
	want := []string{"containerd", "containernetworking-plugins", "conntrack", "iptables"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("missingPackages = %q, want %q", got, want)
	}
}

func TestDefaultRouteInterface(t *testing.T) {
	routes := "Iface\tDestination\tGateway\nlo\t0000007F\t00000000\neth0\t00000000\t010200C0\n"
	if got := defaultRouteInterface(bufio.NewScanner(strings.NewReader(routes))); got != "eth0" {
		t.Errorf("defaultRouteInterface = %q, want eth0", got)
	}
}

func TestAddonManifestsDecodeWithImageAndDNSAddress(t *testing.T) {
	c := Config{DNSIP: "10.96.0.10"}
	text := addonManifests(c, "localhost/coredns:abc")
	if strings.Contains(text, "{{") {
		t.Fatalf("unfilled placeholder in add-ons:\n%s", text)
	}
	objs, err := DecodeManifests([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[o.GetKind()] = true
	}
	for _, k := range []string{"StorageClass", "Deployment", "Service", "ConfigMap", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"} {
		if !kinds[k] {
			t.Errorf("add-ons lack a %s", k)
		}
	}
	if !strings.Contains(text, "image: localhost/coredns:abc") || !strings.Contains(text, "clusterIP: 10.96.0.10") {
		t.Errorf("add-ons do not carry the image and DNS address")
	}
}

// A loopback registry is trusted over plain HTTP for pulls alone, in the
// state directory; a registry elsewhere is refused.
func TestTrustRegistryWritesHostsTomlForLoopbackAlone(t *testing.T) {
	c := Config{StateDir: t.TempDir()}
	if err := TrustRegistry(c, "127.0.0.1:5123"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(c.StateDir, "containerd", "certs.d", "127.0.0.1:5123", "hosts.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`server = "http://127.0.0.1:5123"`, `[host."http://127.0.0.1:5123"]`, `capabilities = ["pull", "resolve"]`} {
		if !strings.Contains(string(got), w) {
			t.Errorf("hosts.toml lacks %q:\n%s", w, got)
		}
	}
	for _, host := range []string{"registry.example:5000", "10.0.0.1:5000", "127.0.0.1"} {
		if err := TrustRegistry(c, host); err == nil {
			t.Errorf("TrustRegistry(%q) was accepted", host)
		}
	}
}

// The host fixes of toolchain.md: without any of them pods fail on this
// machine, so the rendered configurations must keep carrying them.
func TestRenderedConfigsCarryTheHostFixes(t *testing.T) {
	c := Config{StateDir: "/s", DNSIP: "10.96.0.10", ClusterCIDR: "10.244.0.0/16", PodCIDR: "10.244.0.0/24", Bridge: "cni0", NodeName: "n"}
	cases := []struct {
		name, text string
		want       []string
	}{
		{"kubelet", kubeletConfig(c, "192.0.2.2"), []string{"failCgroupV1: false", "cgroupDriver: cgroupfs", "oomScoreAdj: 0", "failSwapOn: false", "resolvConf: /s/resolv.conf"}},
		{"kube-proxy", kubeProxyConfig(c), []string{"oomScoreAdj: 0", "localhostNodePorts: false", "maxPerCore: 0"}},
		{"containerd", containerdConfig(c, "localhost/pause:1"), []string{"restrict_oom_score_adj = true", "SystemdCgroup = false", `sandbox_image = "localhost/pause:1"`, `root = "/s/containerd/root"`, `config_path = "/s/containerd/certs.d"`}},
		{"cni", cniConflist(c), []string{`"ipMasq": false`, `"subnet": "10.244.0.0/24"`, `"dataDir": "/s/cni/ipam"`}},
	}
	for _, tc := range cases {
		for _, w := range tc.want {
			if !strings.Contains(tc.text, w) {
				t.Errorf("%s config lacks %q", tc.name, w)
			}
		}
	}
}

func TestIsOurShimMatchesOnlyShimsOfThisNodesSocket(t *testing.T) {
	sock := "/s/containerd/containerd.sock"
	cases := map[string]struct {
		args []string
		want bool
	}{
		"shim of this node":    {[]string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "k8s.io", "-id", "x", "-address", sock}, true},
		"shim of another":      {[]string{"/usr/bin/containerd-shim-runc-v2", "-address", "/run/containerd/containerd.sock"}, false},
		"reader of a log file": {[]string{"tail", "-f", "/s/logs/kubelet.log", "-address", sock}, false},
		"empty":                {nil, false},
	}
	for name, tc := range cases {
		if got := isOurShim(tc.args, sock); got != tc.want {
			t.Errorf("%s: isOurShim = %v, want %v", name, got, tc.want)
		}
	}
}

// The front proxy's client certificate must chain to its own CA only: the
// cluster CA also signs approved CSRs, which must never pass as the proxy.
func TestFrontProxyClientChainsToItsOwnCAOnly(t *testing.T) {
	dir := t.TempDir()
	c := Config{StateDir: dir, APIServerIP: "10.96.0.1", NodeName: "n"}
	if err := writePKI(dir, certRequests(c, net.ParseIP("192.0.2.2")), time.Now()); err != nil {
		t.Fatal(err)
	}
	load := func(name string) *x509.Certificate {
		data, err := os.ReadFile(filepath.Join(dir, name+".crt"))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(data)
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
	client := load("front-proxy-client")
	if client.Subject.CommonName != "front-proxy-client" {
		t.Errorf("front-proxy-client CN = %q", client.Subject.CommonName)
	}
	if err := client.CheckSignatureFrom(load("front-proxy-ca")); err != nil {
		t.Errorf("front-proxy-client not signed by front-proxy-ca: %v", err)
	}
	if err := client.CheckSignatureFrom(load("ca")); err == nil {
		t.Error("front-proxy-client is signed by the cluster CA")
	}
	args := strings.Join(apiServerArgs(Config{StateDir: "/s"}, "192.0.2.2"), " ")
	for _, w := range []string{"--requestheader-client-ca-file=/s/pki/front-proxy-ca.crt", "--requestheader-allowed-names=front-proxy-client",
		"--proxy-client-cert-file=/s/pki/front-proxy-client.crt", "--audit-policy-file=/s/apiserver/audit-policy.yaml",
		"--audit-log-path=/s/apiserver/audit.log"} {
		if !strings.Contains(args, w) {
			t.Errorf("kube-apiserver args lack %s", w)
		}
	}
}

// A webhook that denies the probe answers; one the API server cannot
// reach does not.
func TestAWebhookDenialIsAnAnswerAndAFailedCallIsNot(t *testing.T) {
	denied := errors.New(`admission webhook "vopenbaocluster.openbao.org" denied the request: OpenBaoCluster.openbao.org "webhook-probe" is invalid: spec.image: Forbidden: image "localhost/openbao:2.4.0" is not from a repository the platform allows`)
	failed := errors.New(`Internal error occurred: failed calling webhook "vopenbaocluster.openbao.org": failed to call webhook: Post "https://openbao-operator-webhook-service.openbao-operator-system.svc:443/validate": dial tcp 10.96.12.3:443: connect: connection refused`)
	if !webhookDenied(denied) {
		t.Error("a denial is not taken for an answer")
	}
	if webhookDenied(failed) {
		t.Error("a failed call is taken for an answer")
	}
}
