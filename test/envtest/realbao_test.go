package envtest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/controllers"
	"github.com/openbao/operator/internal/baoconfig"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/pki"
	"github.com/openbao/operator/internal/values"
	"github.com/openbao/operator/test/baotest"
	"github.com/openbao/operator/test/testbin"
)

// Real OpenBao behind the reconciler. The test plays the kubelet for pod-0:
// it creates the pod object with a loopback address of its own as
// status.podIP and runs bin/bao on that address at port 8200, from what the
// operator wrote: config.hcl from its ConfigMap, the self-init requests
// from their Secret, the TLS Secrets and the unseal key. The reconciler
// reaches it through its production path: openbao.New, the pod's address,
// TLS verified against the cluster CA for pod-0's DNS name.

// requireBao skips a test when bin/bao is missing, and fails it under CI
// (CI=true), where a case that cannot run must not look like one that passed.
func requireBao(t *testing.T) {
	t.Helper()
	if _, err := testbin.Path("bao"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the real-OpenBao cases of the envtest tier cannot run under CI: %v", err)
		}
		t.Skipf("SKIP: no real OpenBao: %v", err)
	}
}

// realReconciler drives the cluster with the production OpenBao client,
// counting its sys/init calls.
func realReconciler(t *testing.T, rec recorder.EventRecorder) (*controllers.OpenBaoClusterReconciler, *atomic.Int32) {
	t.Helper()
	r, err := newReconciler(k8s, k8s, rec)
	if err != nil {
		t.Fatal(err)
	}
	inits := &atomic.Int32{}
	r.OpenBao = func(o openbao.Options) (openbao.Client, error) {
		c, err := openbao.New(o)
		if err != nil {
			return nil, err
		}
		return countedClient{Client: c, inits: inits}, nil
	}
	return r, inits
}

// countedClient counts the sys/init calls that reach the real client.
type countedClient struct {
	openbao.Client
	inits *atomic.Int32
}

func (c countedClient) Init(ctx context.Context, req openbao.InitRequest) (openbao.InitResult, error) {
	c.inits.Add(1)
	return c.Client.Init(ctx, req)
}

// podServer is pod-0 as the test runs it.
type podServer struct {
	*baotest.Server
	cluster *v1alpha1.OpenBaoCluster
	caPEM   []byte
}

// startPod0 starts bao for pod-0 of c from the objects the operator wrote
// in its first pass, and creates the running pod object that points at it.
func startPod0(t *testing.T, c *v1alpha1.OpenBaoCluster) *podServer {
	t.Helper()
	host := freeLoopbackHost(t)
	files, caPEM := pod0Volumes(t, c)
	s := baotest.Start(t, baotest.Options{
		NodeID: c.PodName(0), Config: pod0Config(t, c, host), Files: files,
		Host: host, APIPort: 8200, ClusterPort: 8201, TLS: true,
		// There is no DNS for the pod's name here: the cluster address
		// it advertises is its own. The API address is the pod's, as in
		// a pod: the operator sends a token only to a server that names
		// itself there, and dials the pod's IP, this host.
		Env: []string{
			"BAO_RAFT_NODE_ID={{node_id}}",
			"BAO_API_ADDR=" + c.PodAPIAddress(0),
			"BAO_CLUSTER_ADDR=https://{{host}}:{{cluster_port}}",
		},
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- log of bao for %s at %s ---\n%s", c.PodName(0), s.Addr, s.Log())
		}
	})
	runningPodAt(t, c.Namespace, c.PodName(0), host)
	return &podServer{Server: s, cluster: c, caPEM: caPEM}
}

// client reaches the server as the operator does: the cluster CA, pod-0's
// DNS name.
func (s *podServer) client(t *testing.T, token openbao.Token) openbao.Client {
	t.Helper()
	c, err := openbao.New(openbao.Options{Address: s.Addr, CACert: s.caPEM, ServerName: s.cluster.PodDNSName(0), Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// freeLoopbackHost picks an address in 127.0.0.0/8 whose ports 8200 and
// 8201 are free, so that tests, and test runs of other worktrees, do not
// meet on the port every pod serves.
func freeLoopbackHost(t *testing.T) string {
	t.Helper()
	for range 50 {
		host := fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(254), rand.IntN(256), 1+rand.IntN(254))
		if portsFree(host, "8200", "8201") {
			return host
		}
	}
	t.Fatal("no loopback address with ports 8200 and 8201 free")
	return ""
}

func portsFree(host string, ports ...string) bool {
	for _, port := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort(host, port))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

// configKey is config.hcl's key in the ConfigMap (the chart's configmap.yaml).
const configKey = "config.hcl"

// Where the pod template mounts what bao reads, and where the test puts
// it in the server's directory.
var (
	tlsMount    = path.Dir(values.TLSCertFile)
	unsealMount = path.Dir(baoconfig.DefaultSealKeyFile)
	mounts      = map[string]string{
		tlsMount:                  "{{dir}}/tls",
		unsealMount:               "{{dir}}/unseal",
		baoconfig.DefaultDataPath: "{{dir}}/raft",
	}
)

// pod0Volumes reads the TLS and unseal-key Secrets the operator wrote, as
// the pod's volumes project them; it returns the files and the CA bundle.
func pod0Volumes(t *testing.T, c *v1alpha1.OpenBaoCluster) (map[string][]byte, []byte) {
	t.Helper()
	server, ca, unseal := secretData(t, c, c.TLSServerSecretName()), secretData(t, c, c.TLSCASecretName()),
		secretData(t, c, c.UnsealKeySecretName())
	if server == nil || ca == nil || unseal == nil {
		t.Fatal("the operator has not written its TLS and unseal-key Secrets yet")
	}
	files := map[string][]byte{
		path.Join("tls", pki.CertKey): server[pki.CertKey],
		path.Join("tls", pki.KeyKey):  server[pki.KeyKey],
		path.Join("tls", pki.CAKey):   ca[pki.CAKey],
	}
	for k, v := range unseal {
		files[path.Join("unseal", k)] = v
	}
	return files, ca[pki.CAKey]
}

// pod0Config is config.hcl from the operator's ConfigMap, followed by the
// self-init requests when their Secret exists (bao reads both from its
// config directory), with the mount paths moved into the server's
// directory, the listener on host, and no Kubernetes service registration
// (it needs in-cluster credentials). Without service-registration labels
// the reconciler asks sys/health, which is what these cases exercise.
func pod0Config(t *testing.T, c *v1alpha1.OpenBaoCluster, host string) string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: c.ConfigMapName()}, cm); err != nil {
		t.Fatalf("ConfigMap %s: %v", c.ConfigMapName(), err)
	}
	f, diags := hclwrite.ParseConfig([]byte(cm.Data[configKey]), configKey, hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("config.hcl of ConfigMap %s: %v", cm.Name, diags)
	}
	body := f.Body()
	listener := body.FirstMatchingBlock("listener", []string{"tcp"})
	registration := body.FirstMatchingBlock("service_registration", []string{"kubernetes"})
	if listener == nil || registration == nil {
		t.Fatalf("config.hcl has no listener \"tcp\" or service_registration \"kubernetes\":\n%s", f.Bytes())
	}
	listener.Body().SetAttributeValue("address", cty.StringVal(host+":8200"))
	listener.Body().SetAttributeValue("cluster_address", cty.StringVal(host+":8201"))
	body.RemoveBlock(registration)
	config := string(f.Bytes())
	if selfInit := secretData(t, c, c.SelfInitSecretName()); selfInit != nil {
		config += "\n" + string(selfInit[values.SelfInitFile])
	}
	for mount, local := range mounts {
		if !strings.Contains(config, mount) {
			t.Fatalf("config.hcl no longer mentions %s; update the test's mounts:\n%s", mount, config)
		}
		config = strings.ReplaceAll(config, mount, local)
	}
	return config
}

// secretData is the data of a Secret in c's namespace; nil when it does
// not exist.
func secretData(t *testing.T, c *v1alpha1.OpenBaoCluster, name string) map[string][]byte {
	t.Helper()
	s := &corev1.Secret{}
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("Secret %s: %v", name, err)
	}
	return s.Data
}
