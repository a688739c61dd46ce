package envtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/openbao/operator/api/v1alpha1"
)

const wait = 20 * time.Second

func TestCreateRendersOwnedChildren(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, managedNamespace, `
metadata: {name: lifecycle}
spec:
  version: 2.4.0
  replicas: 3
  ingress: {enabled: true, host: bao.example.com}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ConfigMap/lifecycle-config", "Ingress/lifecycle", "NetworkPolicy/lifecycle",
		"PodDisruptionBudget/lifecycle", "Role/lifecycle-service-registration",
		"RoleBinding/lifecycle-service-registration", "Service/lifecycle", "Service/lifecycle-internal",
		"ServiceAccount/lifecycle", "ServiceAccount/lifecycle-upgrade-serviceaccount", "StatefulSet/lifecycle",
	}
	eventually(t, wait, "every child exists", func() error {
		got, err := childrenOf(ctx, managedNamespace, c.Name)
		if err != nil {
			return err
		}
		for _, name := range want {
			if _, ok := got[name]; !ok {
				return fmt.Errorf("%s missing; have %d children", name, len(got))
			}
		}
		if len(got) != len(want) {
			return fmt.Errorf("have %d children, want %d", len(got), len(want))
		}
		for name, obj := range got {
			ref := metav1.GetControllerOf(&obj)
			if ref == nil || ref.UID != c.UID || ref.Kind != "OpenBaoCluster" {
				return fmt.Errorf("%s is not controlled by the cluster: %v", name, obj.OwnerReferences)
			}
		}
		return nil
	})
	sts := &appsv1.StatefulSet{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: managedNamespace, Name: "lifecycle"}, sts); err != nil {
		t.Fatal(err)
	}
	if *sts.Spec.Replicas != 1 {
		t.Errorf("StatefulSet replicas = %d before initialization, want 1", *sts.Spec.Replicas)
	}
	eventually(t, wait, "Degraded=False", func() error {
		cond, err := condition(ctx, c, v1alpha1.ConditionDegraded)
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonReconciled {
			return fmt.Errorf("Degraded %s/%s: %s", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})

	t.Run("a spec change updates the children", func(t *testing.T) {
		patch := client.MergeFrom(c.DeepCopy())
		c.Spec.Service.Type = corev1.ServiceTypeNodePort
		c.Spec.Config = map[string]apiextJSON{"default_lease_ttl": jsonValue(`"768h"`)}
		if err := k8s.Patch(ctx, c, patch); err != nil {
			t.Fatal(err)
		}
		eventually(t, wait, "Service type and config.hcl follow the spec", func() error {
			svc := &corev1.Service{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: managedNamespace, Name: "lifecycle"}, svc); err != nil {
				return err
			}
			cm := &corev1.ConfigMap{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: managedNamespace, Name: "lifecycle-config"}, cm); err != nil {
				return err
			}
			if svc.Spec.Type != corev1.ServiceTypeNodePort {
				return fmt.Errorf("service type %s", svc.Spec.Type)
			}
			if !strings.Contains(cm.Data["config.hcl"], `default_lease_ttl = "768h"`) {
				return fmt.Errorf("config.hcl lacks default_lease_ttl:\n%s", cm.Data["config.hcl"])
			}
			return nil
		})
	})

	t.Run("disabling the ingress prunes it", func(t *testing.T) {
		patch := client.MergeFrom(c.DeepCopy())
		c.Spec.Ingress.Enabled = false
		if err := k8s.Patch(ctx, c, patch); err != nil {
			t.Fatal(err)
		}
		eventually(t, wait, "Ingress deleted", func() error {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: managedNamespace, Name: "lifecycle"}, &networkingv1.Ingress{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("ingress still there (%v)", err)
		})
	})

	t.Run("a child changed by hand is set back", func(t *testing.T) {
		cm := &corev1.ConfigMap{}
		key := client.ObjectKey{Namespace: managedNamespace, Name: "lifecycle-config"}
		if err := k8s.Get(ctx, key, cm); err != nil {
			t.Fatal(err)
		}
		rendered := cm.Data["config.hcl"]
		cm.Data["config.hcl"] = "ui = true\n"
		if err := k8s.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		eventually(t, wait, "config.hcl restored", func() error {
			if err := k8s.Get(ctx, key, cm); err != nil {
				return err
			}
			if cm.Data["config.hcl"] != rendered {
				return fmt.Errorf("config.hcl is %q", cm.Data["config.hcl"])
			}
			return nil
		})
	})

	t.Run("a deleted child is recreated", func(t *testing.T) {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: managedNamespace, Name: "lifecycle-internal"}}
		if err := k8s.Delete(ctx, svc); err != nil {
			t.Fatal(err)
		}
		eventually(t, wait, "headless Service recreated", func() error {
			fresh := &corev1.Service{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(svc), fresh); err != nil {
				return err
			}
			if fresh.UID == svc.UID {
				return fmt.Errorf("still the old object")
			}
			return nil
		})
	})
}

func TestPausedClusterIsLeftAlone(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, managedNamespace, `
metadata: {name: paused}
spec: {version: 2.4.0, paused: true}
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "Paused=True", func() error {
		cond, err := condition(ctx, c, v1alpha1.ConditionPaused)
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("Paused is %s", cond.Status)
		}
		return nil
	})
	got, err := childrenOf(ctx, managedNamespace, c.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("a paused cluster got children: %v", got)
	}
	latest := &v1alpha1.OpenBaoCluster{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), latest); err != nil {
		t.Fatal(err)
	}
	if latest.Status.Phase != v1alpha1.PhasePaused {
		t.Errorf("phase %s, want Paused", latest.Status.Phase)
	}
}

func TestMissingGatewayAPIIsReportedNotRetriedHot(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, managedNamespace, `
metadata: {name: routed}
spec:
  version: 2.4.0
  gateway:
    enabled: true
    parentRefs: [{name: edge}]
    hostnames: [bao.example.com]
`)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "Degraded=True MissingKind", func() error {
		cond, err := condition(ctx, c, v1alpha1.ConditionDegraded)
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionTrue || cond.Reason != v1alpha1.ReasonMissingKind {
			return fmt.Errorf("Degraded %s/%s", cond.Status, cond.Reason)
		}
		if !strings.Contains(cond.Message, "TLSRoute") {
			return fmt.Errorf("message does not name TLSRoute: %s", cond.Message)
		}
		return nil
	})
	// A missing kind is retried after a minute, not by the error backoff,
	// which would take a dozen passes in the same window.
	const window = 5 * time.Second
	before := reconcilePasses(t)
	time.Sleep(window)
	if passes := reconcilePasses(t) - before; passes > 2 {
		t.Errorf("%d reconcile passes in %s with the Gateway API missing, want at most 2", passes, window)
	}
}

// reconcilePasses counts the OpenBaoCluster passes this process has run,
// from the operator's own histogram.
func reconcilePasses(t *testing.T) uint64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "openbao_reconcile_duration_seconds" {
			return f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatal("no openbao_reconcile_duration_seconds")
	return 0
}
