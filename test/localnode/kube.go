package localnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldOwner is the server-side apply field manager of everything the
// harness applies.
const FieldOwner = "localnode"

// RESTConfig returns the administrator's client configuration.
func (c Config) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", c.Kubeconfig(), err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// Client returns a controller-runtime client for the node.
func (c Config) Client() (client.Client, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	return cl, nil
}

// DecodeManifests splits multi-document YAML into objects, skipping empty
// documents.
func DecodeManifests(data []byte) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("decode manifest: %w", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// Apply server-side applies the objects in order.
func Apply(ctx context.Context, cl client.Client, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		err := cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership)
		if err != nil {
			return fmt.Errorf("apply %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
	return nil
}

// Poll calls cond every interval until it returns true, an error, or the
// timeout passes; the last "not yet" reason is part of the timeout error.
func Poll(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, string, error)) error {
	var reason string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, why, err := cond(ctx)
		reason = why
		return ok, err
	})
	if err != nil {
		return fmt.Errorf("wait for %s (last: %s): %w", what, reason, err)
	}
	return nil
}

// WaitNodeReady waits until the node reports Ready.
func WaitNodeReady(ctx context.Context, cl client.Client, name string, timeout time.Duration) error {
	return Poll(ctx, timeout, "node "+name+" Ready", func(ctx context.Context) (bool, string, error) {
		var n corev1.Node
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			return false, err.Error(), nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, cond.Reason + ": " + cond.Message, nil
			}
		}
		return false, "no Ready condition", nil
	})
}

// WaitDeploymentReady waits until every replica of the Deployment's latest
// generation is updated and available.
func WaitDeploymentReady(ctx context.Context, cl client.Client, key client.ObjectKey, timeout time.Duration) error {
	return Poll(ctx, timeout, "deployment "+key.String(), func(ctx context.Context) (bool, string, error) {
		var d appsv1.Deployment
		if err := cl.Get(ctx, key, &d); err != nil {
			return false, err.Error(), nil
		}
		return deploymentReady(&d)
	})
}

// deploymentReady is the pure readiness decision for a Deployment.
func deploymentReady(d *appsv1.Deployment) (bool, string, error) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	why := fmt.Sprintf("observed generation %d of %d, %d updated, %d available, %d total, want %d",
		s.ObservedGeneration, d.Generation, s.UpdatedReplicas, s.AvailableReplicas, s.Replicas, want)
	ok := s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want &&
		s.AvailableReplicas == want && s.Replicas == want
	return ok, why, nil
}

// ManagerSelector selects the operator's manager pods (the chart's
// selector labels, the same as config/manager's).
var ManagerSelector = client.MatchingLabels{"app.kubernetes.io/name": "openbao-operator", "control-plane": "controller-manager"}

// podProblems says why the selected pods are not Ready, from their
// container states, so that a wait that timed out names the cause (an image
// that cannot be pulled, a manager that exits) instead of only a count.
func podProblems(ctx context.Context, cl client.Client, namespace string, selector client.MatchingLabels) string {
	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.InNamespace(namespace), selector); err != nil {
		return "cannot list them: " + err.Error()
	}
	if len(pods.Items) == 0 {
		return "none"
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Name+" "+string(p.Status.Phase)+containerProblems(p.Status.InitContainerStatuses)+
			containerProblems(p.Status.ContainerStatuses))
	}
	return strings.Join(out, "; ")
}

func containerProblems(statuses []corev1.ContainerStatus) string {
	var b strings.Builder
	for _, s := range statuses {
		if w := s.State.Waiting; w != nil {
			fmt.Fprintf(&b, ", %s waiting: %s %s", s.Name, w.Reason, w.Message)
		}
		if last := s.LastTerminationState.Terminated; last != nil {
			fmt.Fprintf(&b, ", %s exited %d (%s) %d times", s.Name, last.ExitCode, last.Reason, s.RestartCount)
		}
	}
	return b.String()
}

// waitPodsSteady waits until the selected pods are Ready and every
// container of theirs has run for steady without a restart: a manager that
// exits a second after start is Ready, and even answers its webhook, for a
// moment.
func waitPodsSteady(ctx context.Context, cl client.Client, namespace string, selector client.MatchingLabels, steady, timeout time.Duration) error {
	what := fmt.Sprintf("pods %s in %s running steadily", labels.SelectorFromSet(labels.Set(selector)), namespace)
	return Poll(ctx, timeout, what, func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace(namespace), selector); err != nil {
			return false, err.Error(), nil
		}
		live := 0
		for i := range pods.Items {
			if pods.Items[i].DeletionTimestamp != nil {
				continue
			}
			live++
			if ok, why := podSteady(&pods.Items[i], time.Now(), steady); !ok {
				return false, why, nil
			}
		}
		return live > 0, fmt.Sprintf("%d pods", live), nil
	})
}

// podSteady is the pure decision of waitPodsSteady for one pod.
func podSteady(p *corev1.Pod, now time.Time, steady time.Duration) (bool, string) {
	for _, s := range p.Status.ContainerStatuses {
		run := s.State.Running
		if run == nil || !s.Ready {
			return false, fmt.Sprintf("%s/%s not running and ready", p.Name, s.Name)
		}
		if ran := now.Sub(run.StartedAt.Time); ran < steady {
			return false, fmt.Sprintf("%s/%s running for %s only", p.Name, s.Name, ran.Round(time.Millisecond))
		}
	}
	if len(p.Status.ContainerStatuses) == 0 {
		return false, p.Name + " has no container status"
	}
	return true, ""
}
