package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
)

// Commands carry out the plugin's commands in one namespace.
type Commands struct {
	Client client.Client
	// Kube reads pod logs for report and the API's discovery for check;
	// nil leaves the logs out.
	Kube      kubernetes.Interface
	Namespace string
	Now       func() time.Time
	// PodLogs opens a pod's log for logs; nil reads it through Kube.
	PodLogs LogSource
	// Forwarder forwards a local port to a pod's, for bao-env.
	Forwarder Forwarder
	// PollInterval is how often --wait reads the cluster; 0 is
	// DefaultPollInterval.
	PollInterval time.Duration
}

func (c *Commands) cluster(ctx context.Context, name string) (*v1alpha1.OpenBaoCluster, error) {
	cluster := &v1alpha1.OpenBaoCluster{}
	if err := c.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, cluster); err != nil {
		return nil, fmt.Errorf("read OpenBaoCluster %s/%s: %w", c.Namespace, name, err)
	}
	return cluster, nil
}

// Status prints the cluster at a glance, in the format (OutputTable,
// OutputJSON, OutputYAML). It needs the rights of Kubernetes' view role
// and no more: the certificates' expiry comes from status.tls, not from
// their Secrets.
func (c *Commands) Status(ctx context.Context, name, format string, w io.Writer) error {
	in, err := c.statusInput(ctx, name)
	if err != nil {
		return err
	}
	return Print(w, format, NewStatusView(in), func(w io.Writer) error { return WriteStatus(w, in) })
}

func (c *Commands) statusInput(ctx context.Context, name string) (StatusInput, error) {
	cluster, err := c.cluster(ctx, name)
	if err != nil {
		return StatusInput{}, err
	}
	pods := &corev1.PodList{}
	if err := c.Client.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(cluster.PodSelectorLabels())); err != nil {
		return StatusInput{}, fmt.Errorf("list the pods of %s: %w", name, err)
	}
	read := &corev1.PodList{}
	if err := c.Client.List(ctx, read, client.InNamespace(c.Namespace), client.MatchingLabels(cluster.ReadPodSelectorLabels())); err != nil {
		return StatusInput{}, fmt.Errorf("list the read replicas of %s: %w", name, err)
	}
	in := StatusInput{Cluster: cluster, Pods: pods.Items, ReadPods: read.Items, Now: c.Now(),
		Certificates: map[string]time.Time{}, CertificateProblems: map[string]string{}}
	certificateExpiry(cluster.Status.TLS, in)
	return in, nil
}

// certificateExpiry takes the certificates' expiry from status.tls, which
// the operator writes from their public certificates. The plugin reads no
// TLS Secret: both hold a private key beside the certificate, and a get
// returns every key.
func certificateExpiry(st *v1alpha1.TLSStatus, in StatusInput) {
	var server, ca *metav1.Time
	if st != nil {
		server, ca = st.ServerNotAfter, st.CANotAfter
	}
	for what, at := range map[string]*metav1.Time{"server": server, "ca": ca} {
		if at == nil {
			in.CertificateProblems[what] = "not in status.tls yet (the operator writes it once it has read the certificate)"
			continue
		}
		in.Certificates[what] = at.Time
	}
}

// clusterAndServerPods reads the cluster and lists its server pods through
// the clientset, which the commands that stream from pods (logs,
// port-forward) use.
func (c *Commands) clusterAndServerPods(ctx context.Context, name string) (*v1alpha1.OpenBaoCluster, *corev1.PodList, error) {
	cluster, err := c.cluster(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	pods, err := c.Kube.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: cluster.PodLabelSelector()})
	if err != nil {
		return nil, nil, fmt.Errorf("list the server pods of %s: %w", name, err)
	}
	return cluster, pods, nil
}

// SetPaused sets spec.paused with a merge patch, so nothing else of the
// spec is written.
func (c *Commands) SetPaused(ctx context.Context, name string, paused bool) error {
	cluster, err := c.cluster(ctx, name)
	if err != nil {
		return err
	}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"paused":%t}}`, paused))
	if err := c.Client.Patch(ctx, cluster, patch); err != nil {
		return fmt.Errorf("set spec.paused of %s to %t: %w", name, paused, err)
	}
	return nil
}

// Backup asks for an on-demand backup: an OpenBaoBackup naming the cluster,
// which the operator runs like a scheduled one. It returns its name.
func (c *Commands) Backup(ctx context.Context, name string) (string, error) {
	if _, err := c.cluster(ctx, name); err != nil {
		return "", err
	}
	b := &v1alpha1.OpenBaoBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, GenerateName: name + "-manual-",
			Labels: map[string]string{v1alpha1.LabelCluster: name}},
		Spec: v1alpha1.OpenBaoBackupSpec{ClusterName: name},
	}
	if err := c.Client.Create(ctx, b); err != nil {
		return "", fmt.Errorf("create an OpenBaoBackup of %s: %w", name, err)
	}
	return b.Name, nil
}

// RequestStepDown writes spec.stepDownRequest (the current time): the
// operator asks the active server to step down once, with its own OpenBao
// identity, so the caller needs no token. It returns the request's value,
// which status.stepDown.request shows once handled.
func (c *Commands) RequestStepDown(ctx context.Context, name string) (string, error) {
	cluster, err := c.cluster(ctx, name)
	if err != nil {
		return "", err
	}
	request := c.Now().UTC().Format(time.RFC3339Nano)
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"stepDownRequest":%q}}`, request))
	if err := c.Client.Patch(ctx, cluster, patch); err != nil {
		return "", fmt.Errorf("request a step-down of %s: %w", name, err)
	}
	return request, nil
}

// ErrNoHaltedRollout: resume-upgrade found nothing to resume.
var ErrNoHaltedRollout = errors.New("no halted rollout")

// ResumeRequest decides resume-upgrade: a new spec.upgrade.resumeRequest
// (the time, which no earlier request had) when a rollout is halted, and
// ErrNoHaltedRollout otherwise, because a request set while nothing is
// halted resumes nothing (a rollout starts by recording the current one).
func ResumeRequest(c *v1alpha1.OpenBaoCluster, now time.Time) (string, error) {
	up := c.Status.Upgrade
	if up == nil || up.Halted == "" {
		return "", fmt.Errorf("%w: status.upgrade.halted of %s/%s is empty; kubectl openbao status %s shows the rollout",
			ErrNoHaltedRollout, c.Namespace, c.Name, c.Name)
	}
	request := now.UTC().Format(time.RFC3339Nano)
	if request == up.ResumeRequest || request == c.Spec.Upgrade.ResumeRequest {
		request = now.UTC().Add(time.Nanosecond).Format(time.RFC3339Nano)
	}
	return request, nil
}

// ResumeUpgrade resumes a halted rollout: it writes spec.upgrade.
// resumeRequest, and nothing else, with a merge patch. The operator
// resumes once per new value. It returns the request and why the rollout
// halted.
func (c *Commands) ResumeUpgrade(ctx context.Context, name string) (request, halted string, err error) {
	cluster, err := c.cluster(ctx, name)
	if err != nil {
		return "", "", err
	}
	request, err = ResumeRequest(cluster, c.Now())
	if err != nil {
		return "", "", err
	}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"upgrade":{"resumeRequest":%q}}}`, request))
	if err := c.Client.Patch(ctx, cluster, patch); err != nil {
		return "", "", fmt.Errorf("set spec.upgrade.resumeRequest of %s: %w", name, err)
	}
	return request, cluster.Status.Upgrade.Halted, nil
}
