package release_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/test/localnode"
)

// TestTheNodePullsFromTheLoopbackRegistry runs a pod of an image that
// exists only in the registry, named by digest: kubelet has containerd
// pull it over plain HTTP from 127.0.0.1, as the hosts.toml TrustRegistry
// wrote allows, with nothing imported.
func TestTheNodePullsFromTheLoopbackRegistry(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	cl, err := node.Client()
	if err != nil {
		t.Fatal(err)
	}
	img := pushOpenBao(t)
	desc, err := remote.Head(mustTag(t, img.repo+":"+img.tag))
	if err != nil {
		t.Fatal(err)
	}
	ref := img.repo + "@" + desc.Digest.String()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "release-pull-",
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if err := cl.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), ns) })
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bao-version", Namespace: ns.Name},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "bao", Image: ref, Args: []string{"version"},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	start := time.Now()
	if err := cl.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	err = localnode.Poll(ctx, 2*time.Minute, "pod "+ref+" to run to completion", func(ctx context.Context) (bool, string, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err.Error(), nil
		}
		if pod.Status.Phase == corev1.PodFailed {
			return false, "", fmt.Errorf("pod failed: %+v", pod.Status.ContainerStatuses)
		}
		return pod.Status.Phase == corev1.PodSucceeded, waiting(pod), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if id := pod.Status.ContainerStatuses[0].ImageID; !strings.HasSuffix(id, "@"+desc.Digest.String()) {
		t.Errorf("the pod ran image %s, want %s", id, ref)
	}
	logf("the node pulled %s from the registry and ran it in %s", ref, time.Since(start).Round(time.Millisecond))
}

func mustTag(t *testing.T, s string) name.Tag {
	t.Helper()
	tag, err := name.NewTag(s)
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

// waiting names why a pod's containers wait (ErrImagePull, ...).
func waiting(p *corev1.Pod) string {
	var out []string
	for _, s := range p.Status.ContainerStatuses {
		if w := s.State.Waiting; w != nil {
			out = append(out, s.Name+": "+w.Reason+" "+w.Message)
		}
	}
	return fmt.Sprintf("phase %s %v", p.Status.Phase, out)
}
