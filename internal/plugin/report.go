package plugin

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/api/v1alpha1"
)

// ReportOptions say where the operator runs, for its logs.
type ReportOptions struct {
	OperatorNamespace string
	// OperatorSelector selects the operator's pods.
	OperatorSelector map[string]string
	// LogLines is how many of the newest lines of each log to keep.
	LogLines int64
}

// Report writes a support bundle (a tar.gz) of the cluster: its objects,
// the namespace's Events about them, the status summary and the
// operator's logs. Secrets are listed by name and owner, read as
// metadata only: no Secret value leaves the API server, and Secret objects
// are never serialized.
func (c *Commands) Report(ctx context.Context, name string, o ReportOptions, w io.Writer) error {
	cluster, err := c.cluster(ctx, name)
	if err != nil {
		return err
	}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	bundle := &bundle{tar: tw, dir: fmt.Sprintf("openbao-report-%s-%s/", c.Namespace, name), now: c.Now()}
	cluster.ManagedFields = nil
	bundle.yaml("openbaocluster.yaml", cluster)
	var status bytes.Buffer
	if err := c.Status(ctx, name, OutputTable, &status); err != nil {
		fmt.Fprintf(&status, "status failed: %v\n", err)
	}
	bundle.file("status.txt", status.Bytes())
	c.collectObjects(ctx, bundle, cluster)
	c.collectSecretNames(ctx, bundle, name)
	c.collectEvents(ctx, bundle, name)
	c.collectOperatorLogs(ctx, bundle, o)
	bundle.file("errors.txt", []byte(strings.Join(bundle.problems, "\n")+"\n"))
	if err := tw.Close(); err != nil {
		return fmt.Errorf("finish the report archive: %w", err)
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("finish the report archive: %w", err)
	}
	return bundle.err
}

// collectObjects lists the cluster's children of every kind but Secret,
// by the cluster label and, for pods, the pod selector.
func (c *Commands) collectObjects(ctx context.Context, b *bundle, cluster *v1alpha1.OpenBaoCluster) {
	byCluster := client.MatchingLabels{v1alpha1.LabelCluster: cluster.Name}
	for file, list := range map[string]struct {
		obj client.ObjectList
		sel client.MatchingLabels
	}{
		"statefulsets.yaml":           {&appsv1.StatefulSetList{}, byCluster},
		"pods.yaml":                   {&corev1.PodList{}, cluster.PodSelectorLabels()},
		"services.yaml":               {&corev1.ServiceList{}, byCluster},
		"configmaps.yaml":             {&corev1.ConfigMapList{}, byCluster},
		"persistentvolumeclaims.yaml": {&corev1.PersistentVolumeClaimList{}, cluster.PodSelectorLabels()},
		"poddisruptionbudgets.yaml":   {&policyv1.PodDisruptionBudgetList{}, byCluster},
		"jobs.yaml":                   {&batchv1.JobList{}, byCluster},
		"openbaobackups.yaml":         {&v1alpha1.OpenBaoBackupList{}, byCluster},
	} {
		if err := c.Client.List(ctx, list.obj, client.InNamespace(c.Namespace), list.sel); err != nil {
			b.problem("list for %s: %v", file, err)
			continue
		}
		dropManagedFields(list.obj)
		b.yaml(file, list.obj)
	}
}

// collectSecretNames lists the cluster's Secrets by name, creation time
// and owner. It reads them as metadata (PartialObjectMetadata), so that no
// value travels to the machine that writes the report; key names would
// need the whole object.
func (c *Commands) collectSecretNames(ctx context.Context, b *bundle, name string) {
	secrets := &metav1.PartialObjectMetadataList{}
	secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := c.Client.List(ctx, secrets, client.InNamespace(c.Namespace), client.MatchingLabels{v1alpha1.LabelCluster: name}); err != nil {
		b.problem("list Secrets: %v", err)
		return
	}
	var out strings.Builder
	out.WriteString("# Secrets of the cluster: names and owners only, read as metadata; no value left the API server.\n")
	for _, s := range secrets.Items {
		owner := "none"
		if ref := metav1.GetControllerOf(&s); ref != nil {
			owner = ref.Kind + "/" + ref.Name
		}
		fmt.Fprintf(&out, "%s\tcreated %s\towner %s\n", s.Name, s.CreationTimestamp.UTC().Format(time.RFC3339), owner)
	}
	b.file("secrets.txt", []byte(out.String()))
}

// collectEvents keeps the namespace's Events about the cluster's objects,
// whose names are the cluster's or start with it and a dash (bao, bao-0,
// bao-tls-server), and leaves out those about Secrets.
func (c *Commands) collectEvents(ctx context.Context, b *bundle, name string) {
	events := &corev1.EventList{}
	if err := c.Client.List(ctx, events, client.InNamespace(c.Namespace)); err != nil {
		b.problem("list Events: %v", err)
		return
	}
	kept := events.Items[:0]
	for _, e := range events.Items {
		n := e.InvolvedObject.Name
		if (n == name || strings.HasPrefix(n, name+"-")) && e.InvolvedObject.Kind != "Secret" {
			e.ManagedFields = nil
			kept = append(kept, e)
		}
	}
	events.Items = kept
	b.yaml("events.yaml", events)
}

// collectOperatorLogs keeps the newest lines of each operator pod's log.
func (c *Commands) collectOperatorLogs(ctx context.Context, b *bundle, o ReportOptions) {
	if c.Kube == nil || o.OperatorNamespace == "" {
		return
	}
	pods, err := c.Kube.CoreV1().Pods(o.OperatorNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: o.OperatorSelector}),
	})
	if err != nil {
		b.problem("list the operator's pods in %s: %v", o.OperatorNamespace, err)
		return
	}
	for _, p := range pods.Items {
		lines := o.LogLines
		raw, err := c.Kube.CoreV1().Pods(o.OperatorNamespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: &lines}).DoRaw(ctx)
		if err != nil {
			b.problem("read the log of %s/%s: %v", o.OperatorNamespace, p.Name, err)
			continue
		}
		b.file("logs/operator/"+p.Name+".log", raw)
	}
}

func dropManagedFields(list client.ObjectList) {
	items, err := meta.ExtractList(list)
	if err != nil {
		return
	}
	for _, item := range items {
		if o, ok := item.(metav1.Object); ok {
			o.SetManagedFields(nil)
		}
	}
	_ = meta.SetList(list, items)
}

// bundle writes files into the archive and keeps what could not be
// collected, so that one forbidden list does not lose the rest.
type bundle struct {
	tar      *tar.Writer
	dir      string
	now      time.Time
	problems []string
	err      error
}

func (b *bundle) problem(format string, args ...any) {
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}

func (b *bundle) yaml(name string, obj any) {
	if _, isSecret := obj.(*corev1.Secret); isSecret {
		panic("a Secret must never be written into a report") // a programming error
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		b.problem("encode %s: %v", name, err)
		return
	}
	b.file(name, out)
}

func (b *bundle) file(name string, data []byte) {
	if b.err != nil {
		return
	}
	hdr := &tar.Header{Name: b.dir + name, Mode: 0o600, Size: int64(len(data)), ModTime: b.now}
	if err := b.tar.WriteHeader(hdr); err != nil {
		b.err = fmt.Errorf("write %s into the report: %w", name, err)
		return
	}
	if _, err := b.tar.Write(data); err != nil {
		b.err = fmt.Errorf("write %s into the report: %w", name, err)
	}
}
