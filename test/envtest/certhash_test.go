package envtest_test

import (
	"context"
	"crypto/sha256"
	"encoding/pem"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/pki"
)

// TestReadyPodsCarryTheServedCertificateHash: envtest runs no kubelet, so
// the test plays it: it creates the StatefulSet's pods and marks one Ready.
// Only the ready pod gets the annotation, and it holds the SHA-256 of the
// server certificate in <cluster>-tls-server.
func TestReadyPodsCarryTheServedCertificateHash(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, managedNamespace, `
metadata: {name: hashed}
spec: {version: 2.4.0}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	ready, notReady := fakeServerPod(t, "hashed", 0, true), fakeServerPod(t, "hashed", 1, false)
	var server corev1.Secret
	eventually(t, wait, "server Secret", func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: managedNamespace, Name: c.TLSServerSecretName()}, &server)
	})
	block, _ := pem.Decode(server.Data[pki.CertKey])
	want := fmt.Sprintf("%x", sha256.Sum256(block.Bytes))
	// No spec change is needed: the pods' own changes start the passes.
	eventually(t, wait, "the ready pod is annotated", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ready), ready); err != nil {
			return err
		}
		if got := ready.Annotations[pki.CertHashAnnotation]; got != want {
			return fmt.Errorf("annotation %q, want %q", got, want)
		}
		return nil
	})
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(notReady), notReady); err != nil {
		t.Fatal(err)
	}
	if _, ok := notReady.Annotations[pki.CertHashAnnotation]; ok {
		t.Error("a pod that is not ready was annotated")
	}
	expiry := gaugeValue(t, "openbao_tls_cert_expiry_timestamp", map[string]string{
		"namespace": managedNamespace, "name": "hashed", "type": "server"})
	notAfter, _ := pki.NotAfter(server.Data[pki.CertKey])
	if int64(expiry) != notAfter.Unix() {
		t.Errorf("openbao_tls_cert_expiry_timestamp = %v, want %d", expiry, notAfter.Unix())
	}
	// The default rotation period (90 days) renews a third of it before expiry.
	due := gaugeValue(t, "openbao_tls_cert_renewal_due_timestamp", map[string]string{
		"namespace": managedNamespace, "name": "hashed", "type": "server"})
	if want := notAfter.Add(-pki.DefaultRotationPeriod / 3).Unix(); int64(due) != want {
		t.Errorf("openbao_tls_cert_renewal_due_timestamp = %v, want %d (30 days before expiry)", due, want)
	}
}

// fakeServerPod creates the cluster's pod of this ordinal, as the
// StatefulSet controller would, with its readiness set as a kubelet would.
func fakeServerPod(t *testing.T, cluster string, ordinal int, ready bool) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: cluster + "-" + itoa(ordinal), Namespace: managedNamespace, Labels: map[string]string{
			"app.kubernetes.io/name": "openbao", "app.kubernetes.io/instance": cluster, "openbao.org/cluster": cluster,
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "openbao", Image: "openbao"}}},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(time.Now())}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

func gaugeValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels) {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// TestServiceRegistrationLabelsReachStatus: OpenBao relabels its pod when it
// becomes active. Nothing else changes (envtest runs no StatefulSet
// controller, and the resync is minutes away), so only the pod watch can
// bring the cluster back to report its leader.
func TestServiceRegistrationLabelsReachStatus(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, managedNamespace, `
metadata: {name: labelled}
spec: {version: 2.4.0}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	pod := fakeServerPod(t, "labelled", 0, true)
	eventually(t, wait, "a pass that saw the pod", func() error {
		cond, err := condition(ctx, c, v1alpha1.ConditionAvailable)
		if err != nil {
			return err
		}
		if cond.Reason != v1alpha1.ReasonNoActiveServer {
			return fmt.Errorf("Available reason %s", cond.Reason)
		}
		return nil
	})
	patch := client.MergeFrom(pod.DeepCopy())
	pod.Labels["openbao-active"] = "true"
	if err := k8s.Patch(ctx, pod, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "status.activeLeader", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return err
		}
		if c.Status.ActiveLeader != pod.Name {
			return fmt.Errorf("activeLeader %q, want %q", c.Status.ActiveLeader, pod.Name)
		}
		return nil
	})
}
