package plugin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/podstate"
)

// Forwarder forwards a local port on 127.0.0.1 to a port of a pod, as
// kubectl port-forward does, until ctx ends.
type Forwarder interface {
	// Forward returns the local port once it listens (localPort 0: a free
	// one), and a channel that receives the forwarding's end.
	Forward(ctx context.Context, namespace, pod string, localPort, podPort int, notes io.Writer) (int, <-chan error, error)
}

// ErrForwardEnded: the port-forward stopped before Ctrl-C (the pod went
// away, or the connection to the API server broke).
var ErrForwardEnded = errors.New("the port-forward ended")

// BaoEnvOptions are the flags of bao-env.
type BaoEnvOptions struct {
	LocalPort int
	// CacheDir holds the certificate file; empty: the user's cache dir.
	CacheDir string
	// Format is -o: the export lines (OutputTable), or BaoEnvView as
	// JSON or YAML.
	Format string
}

// BaoEnvView is `bao-env -o json|yaml`: the variables and where they lead.
type BaoEnvView struct {
	BaoAddr          string `json:"BAO_ADDR"`
	BaoCACert        string `json:"BAO_CACERT"`
	BaoTLSServerName string `json:"BAO_TLS_SERVER_NAME,omitempty"`
	// Pod is the server forwarded to; Pinned says BAO_CACERT holds its own
	// certificate, not a CA's.
	Pod    string `json:"pod"`
	Pinned bool   `json:"pinned"`
}

// writeExports prints the view as shell export lines.
func writeExports(w io.Writer, v BaoEnvView) error {
	_, err := fmt.Fprintf(w, "export BAO_ADDR=%s\nexport BAO_CACERT=%s\n", v.BaoAddr, shellQuote(v.BaoCACert))
	if err == nil && v.BaoTLSServerName != "" {
		_, err = fmt.Fprintf(w, "export BAO_TLS_SERVER_NAME=%s\n", shellQuote(v.BaoTLSServerName))
	}
	return err
}

// ActiveServer picks the pod bao-env forwards to: the one OpenBao's
// Kubernetes service registration labels openbao-active=true, else the
// leader status.raft names (then status.activeLeader). Only the cluster's
// own running server pods (PodNames) count.
func ActiveServer(cluster *v1alpha1.OpenBaoCluster, pods []corev1.Pod) (string, error) {
	running := map[string]bool{}
	var active []string
	pods = slices.Clone(pods)
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return byOrdinal(a.Name, b.Name) })
	for _, p := range pods {
		if !slices.Contains(cluster.PodNames(), p.Name) || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		running[p.Name] = true
		if podstate.FromKube(&p).Active() {
			active = append(active, p.Name)
		}
	}
	var leaders []string
	if r := cluster.Status.Raft; r != nil {
		leaders = append(leaders, r.Leader)
	}
	leaders = append(leaders, cluster.Status.ActiveLeader)
	for _, leader := range leaders {
		// Two labelled pods: one label is stale; the leader of record wins.
		if len(active) > 1 && slices.Contains(active, leader) {
			return leader, nil
		}
	}
	if len(active) > 0 {
		return active[0], nil
	}
	for _, leader := range leaders {
		if running[leader] {
			return leader, nil
		}
	}
	return "", fmt.Errorf("cluster %s/%s has no active server: no running pod is labelled %s=true and status.raft names no "+
		"running leader (kubectl openbao status %s)", cluster.Namespace, cluster.Name, podstate.LabelActive, cluster.Name)
}

// TrustAnchors is what BAO_CACERT holds: the CA certificates among those
// the server presented, or, when it presented none (the operator's
// servers send their own certificate only), that certificate itself,
// pinned; pinned says so.
func TrustAnchors(presented []*x509.Certificate) (anchors []*x509.Certificate, pinned bool) {
	for _, c := range presented[1:] {
		if c.BasicConstraintsValid && c.IsCA {
			anchors = append(anchors, c)
		}
	}
	if len(anchors) == 0 {
		return presented[:1], true
	}
	return anchors, false
}

// TLSServerName is BAO_TLS_SERVER_NAME: empty when the server's
// certificate names 127.0.0.1 (BAO_ADDR's host), else a name it holds,
// the client Service's first.
func TLSServerName(leaf *x509.Certificate, cluster *v1alpha1.OpenBaoCluster) string {
	if leaf.VerifyHostname("127.0.0.1") == nil {
		return ""
	}
	for _, name := range []string{"localhost", cluster.ClientServiceDNSName()} {
		if leaf.VerifyHostname(name) == nil {
			return name
		}
	}
	if len(leaf.DNSNames) > 0 {
		return leaf.DNSNames[0]
	}
	return ""
}

// BaoEnv forwards a local port to the active server's API port, writes
// the certificate to trust under the cache dir, prints the exports of
// BAO_ADDR, BAO_CACERT (and BAO_TLS_SERVER_NAME when needed), and keeps
// forwarding until ctx ends.
//
// Which certificate: the operator publishes its CA certificate only in
// Secret <cluster>-tls-ca (ca.crt), beside the CA's private key (tls.key,
// next.key); the server Secret holds the server's key. A get of a Secret
// returns every key, so reading ca.crt from either would transfer a
// private key to the user's machine. bao-env reads no Secret: it takes
// the certificates the server presents in its TLS handshake, through the
// port-forward, which the API server authenticates with the user's
// kubeconfig and connects to that pod alone.
func (c *Commands) BaoEnv(ctx context.Context, name string, o BaoEnvOptions, out, notes io.Writer) error {
	cluster, pods, err := c.clusterAndServerPods(ctx, name)
	if err != nil {
		return err
	}
	pod, err := ActiveServer(cluster, pods.Items)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	port, done, err := c.Forwarder.Forward(ctx, c.Namespace, pod, o.LocalPort, v1alpha1.APIPort, notes)
	if err != nil {
		return fmt.Errorf("port-forward to %s/%s: %w", c.Namespace, pod, err)
	}
	presented, err := presentedCertificates(ctx, port)
	if err != nil {
		return fmt.Errorf("read the certificate %s serves: %w", pod, err)
	}
	anchors, pinned := TrustAnchors(presented)
	file, err := writeCertificates(o.CacheDir, c.Namespace, name, anchors)
	if err != nil {
		return err
	}
	v := BaoEnvView{BaoAddr: fmt.Sprintf("https://127.0.0.1:%d", port), BaoCACert: file,
		BaoTLSServerName: TLSServerName(presented[0], cluster), Pod: pod, Pinned: pinned}
	if err := Print(out, o.Format, v, func(w io.Writer) error { return writeExports(w, v) }); err != nil {
		return err
	}
	if pinned {
		fmt.Fprintf(notes, "%s holds the certificate %s presented (it sent no CA certificate): run bao-env again once it is reissued\n", file, pod)
	}
	fmt.Fprintf(notes, "forwarding 127.0.0.1:%d to %s/%s:%d; Ctrl-C stops\n", port, c.Namespace, pod, v1alpha1.APIPort)
	select {
	case <-ctx.Done():
		return nil
	case err := <-done:
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			return fmt.Errorf("%w (to %s/%s)", ErrForwardEnded, c.Namespace, pod)
		}
		return fmt.Errorf("%w (to %s/%s): %w", ErrForwardEnded, c.Namespace, pod, err)
	}
}

// presentedCertificates reads the certificates the server at the local
// port presents. Nothing is sent after the handshake; the chain is not
// verified here because it is what the user is about to trust, and the
// port-forward already names the pod it reaches.
func presentedCertificates(ctx context.Context, port int) ([]*x509.Certificate, error) {
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}} //nolint:gosec // see above
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	certs := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return nil, errors.New("the server presented no certificate")
	}
	return certs, nil
}

// writeCertificates writes the certificates as PEM to
// <dir>/kubectl-openbao/<namespace>_<cluster>-ca.pem and returns its path.
func writeCertificates(dir, namespace, name string, certs []*x509.Certificate) (string, error) {
	if dir == "" {
		var err error
		if dir, err = os.UserCacheDir(); err != nil {
			return "", fmt.Errorf("find the cache dir for the certificate: %w", err)
		}
	}
	dir = filepath.Join(dir, "kubectl-openbao")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	var data []byte
	for _, c := range certs {
		data = append(data, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	path := filepath.Join(dir, namespace+"_"+name+"-ca.pem")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil { //nolint:gosec // public certificates
		return "", fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}

// shellQuote quotes s for a POSIX shell when it holds more than safe
// characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-:+=@,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// spdyForwarder is kubectl port-forward's way: client-go's portforward
// over SPDY to the pod's portforward subresource, with the user's
// kubeconfig.
type spdyForwarder struct {
	config *rest.Config
	kube   kubernetes.Interface
}

func (f spdyForwarder) Forward(ctx context.Context, namespace, pod string, localPort, podPort int, notes io.Writer) (int, <-chan error, error) {
	transport, upgrader, err := spdy.RoundTripperFor(f.config)
	if err != nil {
		return 0, nil, fmt.Errorf("build the SPDY transport: %w", err)
	}
	url := f.kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
	ready := make(chan struct{})
	fw, err := portforward.NewOnAddressesWithContext(ctx, dialer, []string{"127.0.0.1"},
		[]string{fmt.Sprintf("%d:%d", localPort, podPort)}, ready, io.Discard, notes)
	if err != nil {
		return 0, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-done:
		return 0, nil, err
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		return 0, nil, fmt.Errorf("read the forwarded port: %w", err)
	}
	return int(ports[0].Local), done, nil
}

func (c *cli) baoEnvCommand() *cobra.Command {
	o := BaoEnvOptions{}
	cmd := c.clusterCommand("bao-env", "Port-forward to the active server and print BAO_ADDR and BAO_CACERT for the bao CLI",
		func(ctx context.Context, cmds *Commands, cluster string) error {
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			return cmds.BaoEnv(ctx, cluster, o, c.streams.Out, c.streams.ErrOut)
		})
	cmd.Long = "bao-env forwards 127.0.0.1:PORT to port 8200 of the active server (label openbao-active=true, else the " +
		"Raft leader in the cluster's status), writes the certificate to trust to a file under your cache dir, prints " +
		"export lines for BAO_ADDR, BAO_CACERT and, when the certificate does not name 127.0.0.1, BAO_TLS_SERVER_NAME, " +
		"and forwards until Ctrl-C. It reads no Secret: the certificate is the one the server presents (its CA's when " +
		"it sends it, else its own), because the CA Secret also holds the CA's private key."
	cmd.Flags().IntVar(&o.LocalPort, "port", 0, "local port (default: a free one)")
	addOutputFlag(cmd, &o.Format)
	cmd.PreRunE = func(*cobra.Command, []string) error { return CheckOutputFormat(o.Format) }
	return cmd
}
