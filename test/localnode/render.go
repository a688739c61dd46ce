package localnode

import (
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The functions in this file are pure: configuration in, file contents or
// command lines out. Up writes and runs what they return.

func (c Config) pki(name string) string { return filepath.Join(c.pkiDir(), name) }

func (c Config) apiServerURL(nodeIP string) string {
	return fmt.Sprintf("https://%s:%d", nodeIP, c.APIPort)
}

// kubeconfigFor returns a kubeconfig for one client certificate of the PKI.
func kubeconfigFor(c Config, nodeIP, certFile string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["localnode"] = &clientcmdapi.Cluster{
		Server:               c.apiServerURL(nodeIP),
		CertificateAuthority: c.pki("ca.crt"),
	}
	cfg.AuthInfos[certFile] = &clientcmdapi.AuthInfo{
		ClientCertificate: c.pki(certFile + ".crt"),
		ClientKey:         c.pki(certFile + ".key"),
	}
	cfg.Contexts["localnode"] = &clientcmdapi.Context{Cluster: "localnode", AuthInfo: certFile}
	cfg.CurrentContext = "localnode"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encode kubeconfig for %s: %w", certFile, err)
	}
	return data, nil
}

func (c Config) componentKubeconfig(name string) string {
	return c.path("kubeconfigs", name+".kubeconfig")
}

func etcdArgs(c Config) []string {
	return []string{
		"--name=localnode",
		"--data-dir=" + c.path("etcd"),
		fmt.Sprintf("--listen-client-urls=http://127.0.0.1:%d", c.EtcdPort),
		fmt.Sprintf("--advertise-client-urls=http://127.0.0.1:%d", c.EtcdPort),
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", c.EtcdPeer),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", c.EtcdPeer),
		fmt.Sprintf("--initial-cluster=localnode=http://127.0.0.1:%d", c.EtcdPeer),
		"--listen-metrics-urls=",
		"--unsafe-no-fsync", // test data: durability across power loss does not matter
		"--log-level=warn",
	}
}

func apiServerArgs(c Config, nodeIP string) []string {
	return []string{
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", c.EtcdPort),
		"--bind-address=" + nodeIP,
		"--advertise-address=" + nodeIP,
		fmt.Sprintf("--secure-port=%d", c.APIPort),
		"--cert-dir=" + c.path("apiserver"),
		"--service-cluster-ip-range=" + c.ServiceCIDR,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction,PodSecurity",
		"--allow-privileged=true",
		"--client-ca-file=" + c.pki("ca.crt"),
		"--tls-cert-file=" + c.pki("apiserver.crt"),
		"--tls-private-key-file=" + c.pki("apiserver.key"),
		"--kubelet-client-certificate=" + c.pki("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + c.pki("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.pki("sa.pub"),
		"--service-account-signing-key-file=" + c.pki("sa.key"),
		// The aggregation layer, as on any real cluster: an APIService
		// (OLM's packageserver) is reached with the front-proxy client
		// certificate and trusts the user it names in these headers.
		"--requestheader-client-ca-file=" + c.pki("front-proxy-ca.crt"),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + c.pki("front-proxy-client.crt"),
		"--proxy-client-key-file=" + c.pki("front-proxy-client.key"),
		"--profiling=false",
		// What the operator's service accounts ask, at Metadata level
		// (bench-idle counts it); nobody else's requests are written.
		"--audit-policy-file=" + c.path("apiserver", "audit-policy.yaml"),
		"--audit-log-path=" + c.AuditLogPath(),
		"--audit-log-mode=batch",
		"--audit-log-maxsize=100000",
	}
}

// auditPolicy records the requests of the service accounts in the
// operator's namespace, and nothing else: the node's audit log then holds
// exactly what the operator asked of the API server.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts:` + OperatorNamespace + `"]
- level: None
`

// AuditLogPath is the API server's audit log: one JSON event per request
// of the operator's service accounts (auditPolicy).
func (c Config) AuditLogPath() string { return c.path("apiserver", "audit.log") }

func controllerManagerArgs(c Config) []string {
	return []string{
		"--kubeconfig=" + c.componentKubeconfig("controller-manager"),
		"--secure-port=0",
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + c.pki("sa.key"),
		"--root-ca-file=" + c.pki("ca.crt"),
		"--cluster-signing-cert-file=" + c.pki("ca.crt"),
		"--cluster-signing-key-file=" + c.pki("ca.key"),
		"--allocate-node-cidrs=true",
		"--cluster-cidr=" + c.ClusterCIDR,
		"--node-cidr-mask-size=24",
		"--service-cluster-ip-range=" + c.ServiceCIDR,
		"--enable-hostpath-provisioner=true",
		"--controllers=*,-cloud-node-lifecycle,-service,-route",
		"--profiling=false",
	}
}

func schedulerArgs(c Config) []string {
	return []string{
		"--kubeconfig=" + c.componentKubeconfig("scheduler"),
		"--secure-port=0",
		"--leader-elect=false",
		"--profiling=false",
		// A pod scheduled while its claim was still being provisioned was
		// seen to miss the claim's binding under load and wait out the
		// default 5 minutes as unschedulable; 10 s bounds such a stall.
		"--pod-max-in-unschedulable-pods-duration=10s",
	}
}

func kubeletArgs(c Config, nodeIP string) []string {
	return []string{
		"--config=" + c.path("kubelet-config.yaml"),
		"--kubeconfig=" + c.componentKubeconfig("kubelet"),
		"--root-dir=" + c.path("kubelet"),
		"--cert-dir=" + c.path("kubelet", "pki"),
		"--hostname-override=" + c.NodeName,
		"--node-ip=" + nodeIP,
		"--v=1",
	}
}

// kubeletConfig carries this host's fixes: no negative oom_score_adj
// (CAP_SYS_RESOURCE is withheld), cgroup v1 with the cgroupfs driver, swap
// allowed, and no image garbage collection of the locally imported images.
func kubeletConfig(c Config, nodeIP string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %[2]s
tlsPrivateKeyFile: %[3]s
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[4]s
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://%[5]s
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
clusterDNS:
- %[6]s
clusterDomain: cluster.local
resolvConf: %[7]s
podLogsDir: %[8]s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
serializeImagePulls: false
maxPods: 110
`, nodeIP, c.pki("kubelet-serving.crt"), c.pki("kubelet-serving.key"), c.pki("ca.crt"),
		c.containerdSock(), c.DNSIP, c.path("resolv.conf"), c.path("pod-logs"))
}

// kubeProxyConfig leaves the conntrack sysctls and route_localnet alone
// (zero means "do not set"; no localhost node ports).
func kubeProxyConfig(c Config) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
mode: iptables
clusterCIDR: %s
hostnameOverride: %s
oomScoreAdj: 0
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
iptables:
  localhostNodePorts: false
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, c.componentKubeconfig("kube-proxy"), c.ClusterCIDR, c.NodeName)
}

// containerdConfig keeps containerd's root, state and socket in the state
// directory, runs runc with cgroupfs and restricts oom_score_adj, without
// which every sandbox fails on this host. Registries are configured by
// hosts.toml files under the state directory (TrustRegistry), which
// containerd reads at each pull, so a registry started after the node is
// trusted without a restart.
func containerdConfig(c Config, sandboxImage string) string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
`, c.path("containerd", "root"), c.path("containerd", "state"), c.containerdSock(),
		c.containerdSock()+".ttrpc", c.path("containerd", "opt"), sandboxImage, c.path("cni", "net.d"), c.registryHostsDir())
}

// cniConflist is a bridge network without IP masquerade: pods talk to each
// other, to Services and to this host, and nothing is translated to leave it.
func cniConflist(c Config) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "localnode",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, c.Bridge, c.PodCIDR, c.path("cni", "ipam"))
}

// managedSysctls are the kernel settings the components change (kubelet:
// the vm and kernel ones; the bridge plugin: ip_forward; kube-proxy would
// set route_localnet and the conntrack ones). Up saves them, Down restores.
var managedSysctls = []string{
	"vm.overcommit_memory",
	"vm.panic_on_oom",
	"kernel.panic",
	"kernel.panic_on_oops",
	"kernel.keys.root_maxkeys",
	"kernel.keys.root_maxbytes",
	"net.ipv4.ip_forward",
	"net.ipv4.conf.all.forwarding",
	"net.ipv4.conf.all.route_localnet",
	"net.ipv6.conf.all.forwarding",
	"net.bridge.bridge-nf-call-iptables",
	"net.bridge.bridge-nf-call-ip6tables",
	"net.netfilter.nf_conntrack_max",
}

// globalPaths are the paths the components use whatever their flags say.
var globalPaths = []string{
	"/var/lib/kubelet",
	"/var/log/containers",
	"/var/log/pods",
	"/var/lib/cni",
	"/run/containerd",
	"/run/netns",
	"/tmp/hostpath_pv",
	"/etc/kubernetes",
	"/var/lib/containerd",
	"/opt/containerd",
}

func sysctlPath(key string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
}
