package e2e_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/autopilot"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/pki"
	"github.com/openbao/operator/internal/render"
	"github.com/openbao/operator/internal/sealkey"
	"github.com/openbao/operator/internal/values"
	"github.com/openbao/operator/test/localnode"
)

// The floor of the formation benchmark: the objects the operator would
// render, with 3 replicas from the start, applied by a bare script that
// initializes pod-0 the moment it answers and does nothing else. No CR is
// stored, so the operator never sees these namespaces.
//
// The gated floor does what the operator does, without the operator: one
// replica until pod-0 is initialized, then the scaled-out render. It
// separates what the operator's own passes cost from what starting the
// joiners after initialization costs.

// bareScript says how a floor run bootstraps.
type bareScript struct {
	tuned bool // the operator's Raft timers and bootstrap autopilot, else OpenBao's own
	gated bool // one replica until initialized, as the operator renders
}

// runBareScript runs one floor.
func runBareScript(ctx context.Context, b *testing.B, r *benchRun, how bareScript) {
	c := bareCluster(ctx, b, r.cl, r.ns, how.tuned)
	replicasFirst := int64(replicas)
	if how.gated {
		replicasFirst = 1
	}
	objs := bareObjects(b, c, r.wrapperImage, replicasFirst)
	secrets, caPEM := bareSecrets(b, c)
	// The objects carry the operator's labels, which the lock of
	// config/admission keeps to the operator and the break-glass group.
	glass := breakGlassClient(b)
	r.begin(nil)
	for _, s := range secrets {
		if err := glass.Create(ctx, s); err != nil {
			b.Fatalf("create Secret %s: %v", s.Name, err)
		}
	}
	applyAll(ctx, b, glass, objs)
	pod0 := &corev1.Pod{}
	waitEvery(ctx, b, 100*time.Millisecond, time.Until(r.deadline), "an IP for pod-0", func() (bool, string) {
		err := r.cl.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: c.PodName(0)}, pod0)
		return err == nil && pod0.Status.PodIP != "", fmt.Sprint(err)
	})
	token := initPod0(ctx, b, r, c, pod0.Status.PodIP, caPEM, how.tuned)
	if how.gated {
		c.Status.Initialized = true
		applyAll(ctx, b, glass, bareObjects(b, c, r.wrapperImage, int64(values.InputFor(c, &c.Status).Replicas)))
		r.tl.mark("scaled out")
	}
	waitVoters(ctx, b, r, *pod0, caPEM, token.Reveal())
}

func applyAll(ctx context.Context, b *testing.B, cl client.Client, objs []*unstructured.Unstructured) {
	for _, o := range objs {
		err := cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(o),
			client.FieldOwner("bench-script"), client.ForceOwnership)
		if err != nil {
			b.Fatalf("apply %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// bareCluster is the OpenBaoCluster the operator would be given, with the
// API server's defaults applied by a dry-run create (nothing is stored),
// as the typed struct that values and render take.
func bareCluster(ctx context.Context, b *testing.B, cl client.Client, ns string, tuned bool) *v1alpha1.OpenBaoCluster {
	u := clusterObject(b, ns, benchCluster, nil)
	if err := cl.Create(ctx, u, client.DryRunAll); err != nil {
		b.Fatalf("dry-run create of the OpenBaoCluster: %v", err)
	}
	c := &v1alpha1.OpenBaoCluster{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, c); err != nil {
		b.Fatalf("convert the defaulted OpenBaoCluster: %v", err)
	}
	if !tuned {
		// OpenBao's own defaults, which the operator's renderer replaces
		// when the spec leaves them unset.
		c.Spec.Configuration.Raft.PerformanceMultiplier = ptr.To(int32(5))
		c.Spec.Configuration.Raft.AutopilotReconcileInterval = &metav1.Duration{Duration: 10 * time.Second}
		c.Spec.Configuration.Raft.AutopilotUpdateInterval = &metav1.Duration{Duration: 2 * time.Second}
	}
	return c
}

// bareObjects renders the chart as the operator would for the cluster's
// status (before initialization config.hcl joins pod-0 by
// leader_api_addr), with the given number of replicas.
func bareObjects(b *testing.B, c *v1alpha1.OpenBaoCluster, wrapperImage string, n int64) []*unstructured.Unstructured {
	cfg, err := values.ConfigFor(values.InputFor(c, &c.Status))
	if err != nil {
		b.Fatal(err)
	}
	vals, err := values.Compute(values.InputFor(c, &c.Status), values.Operator{Namespace: localnode.OperatorNamespace, WrapperImage: wrapperImage}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	vals["replicas"] = n
	renderer, err := render.New()
	if err != nil {
		b.Fatal(err)
	}
	objs, err := renderer.Render(c.Namespace, c.Name, vals)
	if err != nil {
		b.Fatal(err)
	}
	for _, o := range objs {
		// The chart sets none (the operator's applier adds its own); an
		// owner here would point at a CR that does not exist.
		o.SetOwnerReferences(nil)
	}
	return objs
}

// bareSecrets are the Secrets the chart mounts, shaped as the operator
// writes them (controllers/cluster_tls.go and cluster_seal.go) but with no owner, in the
// order it writes them; caPEM is the bundle that verifies the servers.
func bareSecrets(b *testing.B, c *v1alpha1.OpenBaoCluster) (secrets []*corev1.Secret, caPEM []byte) {
	spec := values.PKISpec(c)
	now := time.Now()
	material, err := pki.Execute(pki.Decide(pki.Observed{}, spec, now), pki.Observed{}, spec, now, rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	key, err := sealkey.New(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: map[string]string{
			v1alpha1.LabelCluster: c.Name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
		}}
	}
	return []*corev1.Secret{
		{ObjectMeta: meta(c.TLSCASecretName()), Type: corev1.SecretTypeTLS, Data: pki.CASecretData(material.CA)},
		{ObjectMeta: meta(c.TLSServerSecretName()), Type: corev1.SecretTypeTLS, Data: pki.ServerSecretData(material.Server)},
		{ObjectMeta: meta(c.UnsealKeySecretName()), Type: corev1.SecretTypeOpaque, Immutable: ptr.To(true),
			Data: map[string][]byte{sealkey.DataKey: key}},
	}, material.CA.BundlePEM
}

// initPod0 initializes the cluster through pod-0 as soon as it answers
// 501 and, when tuned, writes the operator's bootstrap autopilot
// configuration. The root token stays in memory.
func initPod0(ctx context.Context, b *testing.B, r *benchRun, c *v1alpha1.OpenBaoCluster, podIP string, caPEM []byte, tuned bool) openbao.Token {
	opts := openbao.Options{Address: "https://" + net.JoinHostPort(podIP, "8200"), CACert: caPEM, ServerName: c.PodDNSName(0)}
	bao, err := openbao.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	waitEvery(ctx, b, 100*time.Millisecond, time.Until(r.deadline), "pod-0 to answer 501", func() (bool, string) {
		h, err := bao.Health(ctx)
		if err != nil {
			return false, err.Error()
		}
		return !h.Initialized, fmt.Sprintf("%+v", h)
	})
	r.tl.mark("501 answered")
	res, err := bao.Init(ctx, openbao.InitRequest{})
	if err != nil {
		b.Fatalf("sys/init: %v", err)
	}
	r.tl.mark("init returned")
	if tuned {
		opts.Token = res.RootToken
		setBootstrapAutopilot(ctx, b, r, opts)
	}
	return res.RootToken
}

// setBootstrapAutopilot writes what the operator writes right after
// sys/init. The node is not active yet when sys/init returns, so errors
// other than a refusal are retried every 200 ms.
func setBootstrapAutopilot(ctx context.Context, b *testing.B, r *benchRun, opts openbao.Options) {
	bao, err := openbao.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	want := autopilot.For(replicas, autopilot.Overrides{}, autopilot.PhaseBootstrap)
	waitFor(ctx, b, time.Until(r.deadline), "the autopilot configuration to be written", func() (bool, string) {
		err := bao.SetAutopilotConfiguration(ctx, want)
		if errors.Is(err, openbao.ErrInvalidRequest) || errors.Is(err, openbao.ErrPermissionDenied) {
			b.Fatalf("autopilot configuration refused: %v", err)
		}
		return err == nil, fmt.Sprint(err)
	})
	r.tl.mark("autopilot set")
}
