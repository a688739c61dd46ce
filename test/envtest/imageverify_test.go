package envtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/test/cosigntest"
)

// The suite's reconciler verifies with cosign against a real registry on
// loopback: 2.4.0 carries a bundle signed by the key, 2.4.1 no signature.
func imageFixture(t *testing.T) (image, pemKey, digest string) {
	t.Helper()
	image, pemKey, digest, _ = imageRegistry(t)
	return image, pemKey, digest
}

func imageRegistry(t *testing.T) (image, pemKey, digest string, reg *cosigntest.Registry) {
	t.Helper()
	reg = cosigntest.New(t, "", "")
	key := cosigntest.NewKey(t)
	signed := reg.Push(t, "openbao/openbao", "2.4.0")
	reg.SignBundle(t, key, signed, signed)
	reg.Push(t, "openbao/openbao", "2.4.1")
	return reg.Host + "/openbao/openbao", cosigntest.PublicPEM(t, key), signed.DigestStr(), reg
}

func verifiedCluster(t *testing.T, name, image, key, version, policy string) *v1alpha1.OpenBaoCluster {
	t.Helper()
	c := newCluster(t, managedNamespace, fmt.Sprintf(`
metadata: {name: %s}
spec:
  version: %s
  image: %s
  imageVerification: {enabled: true, failurePolicy: %s}
`, name, version, image, policy))
	c.Spec.ImageVerification.PublicKey = key
	if err := k8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), c) })
	return c
}

func serverImage(ctx context.Context, c *v1alpha1.OpenBaoCluster) (*appsv1.StatefulSet, string, error) {
	sts := &appsv1.StatefulSet{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.StatefulSetName()}, sts); err != nil {
		return nil, "", err
	}
	for _, ctr := range sts.Spec.Template.Spec.Containers {
		if ctr.Name == "openbao" {
			return sts, ctr.Image, nil
		}
	}
	return sts, "", fmt.Errorf("no openbao container in %s", sts.Name)
}

// warningEvent finds a Warning event of the cluster with reason.
func warningEvent(ctx context.Context, c *v1alpha1.OpenBaoCluster, reason string) (*eventsv1.Event, error) {
	list := &eventsv1.EventList{}
	if err := k8s.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		return nil, err
	}
	for i, e := range list.Items {
		if e.Regarding.Name == c.Name && e.Regarding.Kind == "OpenBaoCluster" && e.Type == "Warning" && e.Reason == reason {
			return &list.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no Warning %s event of %s", reason, c.Name)
}

// Under Block, a verified image is pinned by digest; a version whose image
// is unsigned marks the cluster Degraded and leaves the StatefulSet as it
// was, pinned to the verified digest.
func TestImageVerificationBlockPinsAndHolds(t *testing.T) {
	ctx := context.Background()
	image, key, digest := imageFixture(t)
	c := verifiedCluster(t, "image-block", image, key, "2.4.0", "Block")
	want := image + ":2.4.0@" + digest
	var before *appsv1.StatefulSet
	eventually(t, wait, "the StatefulSet runs the verified digest", func() error {
		sts, got, err := serverImage(ctx, c)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("image %q, want %q", got, want)
		}
		before = sts
		cond, err := condition(ctx, c, v1alpha1.ConditionImageVerified)
		if err != nil || cond.Status != "True" {
			return fmt.Errorf("ImageVerified %+v (%v)", cond, err)
		}
		return nil
	})

	latest := &v1alpha1.OpenBaoCluster{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), latest); err != nil {
		t.Fatal(err)
	}
	latest.Spec.Version = "2.4.1"
	if err := k8s.Update(ctx, latest); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "Degraded=True ImageVerificationFailed", func() error {
		cond, err := condition(ctx, c, v1alpha1.ConditionDegraded)
		if err != nil {
			return err
		}
		if cond.Status != "True" || cond.Reason != v1alpha1.ReasonImageVerificationFailed {
			return fmt.Errorf("Degraded %s %s: %s", cond.Status, cond.Reason, cond.Message)
		}
		verified, err := condition(ctx, c, v1alpha1.ConditionImageVerified)
		if err != nil || verified.Status != "False" || verified.Reason != v1alpha1.ReasonUnsigned {
			return fmt.Errorf("ImageVerified %+v (%v)", verified, err)
		}
		_, err = warningEvent(ctx, c, v1alpha1.ReasonImageVerificationFailed)
		return err
	})
	sts, got, err := serverImage(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || sts.Generation != before.Generation {
		t.Errorf("the StatefulSet changed under Block: image %q (want %q), generation %d (was %d)", got, want, sts.Generation, before.Generation)
	}
}

// Under Warn, an unsigned image is applied by its tag, with a Warning event.
func TestImageVerificationWarnProceedsUnpinned(t *testing.T) {
	ctx := context.Background()
	image, key, _ := imageFixture(t)
	c := verifiedCluster(t, "image-warn", image, key, "2.4.1", "Warn")
	eventually(t, wait, "the StatefulSet runs the tag, unpinned, with a Warning event", func() error {
		_, got, err := serverImage(ctx, c)
		if err != nil {
			return err
		}
		if got != image+":2.4.1" {
			return fmt.Errorf("image %q, want %q", got, image+":2.4.1")
		}
		verified, err := condition(ctx, c, v1alpha1.ConditionImageVerified)
		if err != nil || verified.Status != "False" || verified.Reason != v1alpha1.ReasonUnsigned {
			return fmt.Errorf("ImageVerified %+v (%v)", verified, err)
		}
		e, err := warningEvent(ctx, c, v1alpha1.ReasonImageVerificationFailed)
		if err != nil {
			return err
		}
		if !strings.Contains(e.Note, "Warn") {
			return fmt.Errorf("event note %q does not say the policy", e.Note)
		}
		return nil
	})
	if cond, err := condition(ctx, c, v1alpha1.ConditionDegraded); err == nil && cond.Reason == v1alpha1.ReasonImageVerificationFailed {
		t.Errorf("Warn made the cluster Degraded: %s", cond.Message)
	}
}

// A registry that cannot be reached does not undo a verified digest: it
// stays pinned, ImageVerified says so, and the cluster is not Degraded.
func TestImageVerificationKeepsTheDigestWhileTheRegistryIsDown(t *testing.T) {
	ctx := context.Background()
	image, key, digest, reg := imageRegistry(t)
	c := verifiedCluster(t, "image-down", image, key, "2.4.0", "Block")
	want := image + ":2.4.0@" + digest
	// The StatefulSet is applied before the pass writes its status: wait
	// for the recorded digest too, or the registry goes down before the
	// operator remembers what it verified.
	eventually(t, wait, "the StatefulSet runs the verified digest, and the status records it", func() error {
		_, got, err := serverImage(ctx, c)
		if err == nil && got != want {
			err = fmt.Errorf("image %q, want %q", got, want)
		}
		if err != nil {
			return err
		}
		latest := &v1alpha1.OpenBaoCluster{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), latest); err != nil {
			return err
		}
		if v := latest.Status.ImageVerification; v == nil || v.Digest != digest {
			return fmt.Errorf("status.imageVerification %+v", v)
		}
		return nil
	})
	reg.Close()
	latest := &v1alpha1.OpenBaoCluster{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), latest); err != nil {
		t.Fatal(err)
	}
	latest.Spec.Replicas = 5 // any spec change: the next pass verifies again
	if err := k8s.Update(ctx, latest); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "ImageVerified=True VerifiedEarlier", func() error {
		cond, err := condition(ctx, c, v1alpha1.ConditionImageVerified)
		if err != nil {
			return err
		}
		if cond.Status != "True" || cond.Reason != v1alpha1.ReasonVerifiedEarlier {
			return fmt.Errorf("ImageVerified %s %s: %s", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
	if cond, err := condition(ctx, c, v1alpha1.ConditionDegraded); err != nil || cond.Status != "False" {
		t.Errorf("Degraded %+v (%v), want False", cond, err)
	}
	if _, got, err := serverImage(ctx, c); err != nil || got != want {
		t.Errorf("image %q (%v), want still %q", got, err, want)
	}
}

// A keyless identity is verified against the trusted root in a ConfigMap
// of the user's (no operator label: read uncached). Until it exists the
// cluster says which ConfigMap it misses and nothing is created; once it
// does, the image signed by the identity runs by its digest.
func TestImageVerificationKeyless(t *testing.T) {
	ctx := context.Background()
	reg := cosigntest.New(t, "", "")
	sigstore := cosigntest.NewSigstore(t)
	signed := reg.Push(t, "openbao/openbao", "2.4.0")
	reg.SignKeyless(t, sigstore, "https://token.actions.githubusercontent.com",
		"https://github.com/openbao/openbao/.github/workflows/release.yml@refs/tags/v2.4.0", signed, signed)
	image := reg.Host + "/openbao/openbao"
	c := newCluster(t, managedNamespace, fmt.Sprintf(`
metadata: {name: image-keyless}
spec:
  version: 2.4.0
  image: %s
  imageVerification:
    enabled: true
    keyless:
      issuer: "https://token.actions.githubusercontent.com"
      subjectRegExp: "^https://github.com/openbao/openbao/"
      trustedRootConfigMapRef: {name: sigstore-root}
`, image))
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), c) })
	eventually(t, wait, "ImageVerified=False InvalidPolicy naming the missing ConfigMap", func() error {
		cond, err := condition(ctx, c, v1alpha1.ConditionImageVerified)
		if err != nil {
			return err
		}
		if cond.Status != "False" || cond.Reason != v1alpha1.ReasonInvalidPolicy ||
			!strings.Contains(cond.Message, "ConfigMap "+managedNamespace+"/sigstore-root, key trusted_root.json") {
			return fmt.Errorf("ImageVerified %s %s: %s", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
	if _, _, err := serverImage(ctx, c); err == nil {
		t.Error("a StatefulSet was created for an image that could not be verified")
	}

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "sigstore-root", Namespace: managedNamespace},
		Data:       map[string]string{"trusted_root.json": string(sigstore.TrustedRootJSON(t))},
	}
	if err := k8s.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), cm) })
	// The pass comes back for the ConfigMap after 30 s by itself; a spec
	// change brings it back now.
	latest := &v1alpha1.OpenBaoCluster{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), latest); err != nil {
		t.Fatal(err)
	}
	latest.Spec.Replicas = 5
	if err := k8s.Update(ctx, latest); err != nil {
		t.Fatal(err)
	}
	want := image + ":2.4.0@" + signed.DigestStr()
	eventually(t, wait, "the StatefulSet runs the keylessly verified digest", func() error {
		_, got, err := serverImage(ctx, c)
		if err == nil && got != want {
			err = fmt.Errorf("image %q, want %q", got, want)
		}
		if err != nil {
			return err
		}
		cond, err := condition(ctx, c, v1alpha1.ConditionImageVerified)
		if err != nil || cond.Status != "True" {
			return fmt.Errorf("ImageVerified %+v (%v)", cond, err)
		}
		return nil
	})
}
