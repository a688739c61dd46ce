package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/imageverify"
	"github.com/openbao/operator/internal/values"
)

const (
	// imageVerifyTimeout bounds one verification: the registry round trips
	// of a tag, its referrers and its .sig tag.
	imageVerifyTimeout = time.Minute
	// imageRetry is how soon a verification the registry stood in the way
	// of is tried again.
	imageRetry = 30 * time.Second
)

// reconcileImagePolicy holds the platform's image policy against every
// image the cluster names (imagepolicy.CheckCluster, the webhook's rule
// too), for clusters stored while the webhook was away or before the
// policy was tightened: nothing is applied for a cluster whose image the
// platform does not allow, and the servers that run stay as they are.
func (r *OpenBaoClusterReconciler) reconcileImagePolicy(_ context.Context, p *pass) error {
	errs := r.ImagePolicy.CheckCluster(p.cluster)
	if len(errs) == 0 {
		return nil
	}
	msg := errs.ToAggregate().Error()
	p.degrade(v1alpha1.ReasonImageNotAllowed, msg)
	p.record("Warning", v1alpha1.ReasonImageNotAllowed, "ImagePolicy", msg)
	return errStop
}

// reconcileImage owns ImageVerified and status.imageVerification: with
// spec.imageVerification on, it verifies the image the servers pull before
// anything of the StatefulSet is written, and leaves the verified digest in
// status, which the chart pins. A failure under Block ends the pass here,
// so the StatefulSet and its running pods stay as they are; under Warn the
// pass goes on with the image by its tag.
func (r *OpenBaoClusterReconciler) reconcileImage(ctx context.Context, p *pass) error {
	spec := p.cluster.Spec.ImageVerification
	if !spec.Verifies() {
		p.status.ImageVerification = nil
		meta.RemoveStatusCondition(&p.status.Conditions, v1alpha1.ConditionImageVerified)
		return nil
	}
	if r.ImageVerifier == nil {
		return errors.New("spec.imageVerification is on but this operator has no image verifier")
	}
	policy, err := r.imagePolicy(ctx, p.cluster)
	var kc authn.Keychain
	if err == nil {
		kc, err = r.pullKeychain(ctx, p.cluster)
	}
	if err != nil && !errors.Is(err, imageverify.ErrInvalidPolicy) {
		return err
	}
	pulled := values.PulledImage(p.cluster, r.Operator)
	var res imageverify.Result
	if err == nil {
		res, err = r.verifyImage(ctx, kc, pulled, policy)
	}
	if err == nil {
		imageVerified(p, pulled, policy, res)
		return nil
	}
	if errors.Is(err, errTrustedRootMissing) {
		// Nothing watches the ConfigMap: look again for it.
		p.requeueAfter(imageRetry)
	}
	return imageFailed(p, pulled, policy, err)
}

// errTrustedRootMissing: the keyless trusted root's ConfigMap or key does
// not exist (yet).
var errTrustedRootMissing = fmt.Errorf("%w: the keyless trusted root is missing", imageverify.ErrInvalidPolicy)

// imagePolicy is the spec's key, or its keyless identity with the trusted
// root read from its ConfigMap. The ConfigMap is the user's and carries no
// operator label, so it is read through the uncached reader, on every
// pass: a root replaced in place is used from the next pass on.
func (r *OpenBaoClusterReconciler) imagePolicy(ctx context.Context, c *v1alpha1.OpenBaoCluster) (imageverify.Policy, error) {
	spec := c.Spec.ImageVerification
	k := spec.Keyless
	if k == nil {
		return imageverify.Policy{PublicKey: spec.PublicKey}, nil
	}
	ref := k.TrustedRootConfigMapRef
	source := fmt.Sprintf("ConfigMap %s/%s, key %s", c.Namespace, ref.Name, ref.KeyOrDefault())
	cm := &corev1.ConfigMap{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: ref.Name}, cm)
	if apierrors.IsNotFound(err) {
		return imageverify.Policy{}, fmt.Errorf("%w: %s not found", errTrustedRootMissing, source)
	}
	if err != nil {
		return imageverify.Policy{}, fmt.Errorf("read the keyless trusted root, %s: %w", source, err)
	}
	root, ok := cm.Data[ref.KeyOrDefault()]
	if !ok {
		if b, found := cm.BinaryData[ref.KeyOrDefault()]; found {
			root, ok = string(b), true
		}
	}
	if !ok {
		return imageverify.Policy{}, fmt.Errorf("%w: %s: the ConfigMap has no such key", errTrustedRootMissing, source)
	}
	return imageverify.Policy{Keyless: &imageverify.Identity{
		Issuer: k.Issuer, Subject: k.Subject, SubjectRegExp: k.SubjectRegExp,
		TrustedRoot: []byte(root), TrustedRootSource: source,
	}}, nil
}

// verifyImage asks the verifier, with a bound on the registry's time.
func (r *OpenBaoClusterReconciler) verifyImage(ctx context.Context, kc authn.Keychain, image string, policy imageverify.Policy) (imageverify.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, imageVerifyTimeout)
	defer cancel()
	return r.ImageVerifier.Verify(ctx, imageverify.Request{Image: image, Policy: policy, Keychain: kc})
}

// pullKeychain reads the imagePullSecrets the chart gives the servers; a
// missing one is skipped, as the kubelet does. Unusable secrets are
// ErrInvalidPolicy; other errors are the API server's.
func (r *OpenBaoClusterReconciler) pullKeychain(ctx context.Context, c *v1alpha1.OpenBaoCluster) (authn.Keychain, error) {
	names, err := values.PullSecretNames(c, r.Operator)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", imageverify.ErrInvalidPolicy, err)
	}
	var secrets []imageverify.PullSecret
	for _, name := range names {
		s := &corev1.Secret{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, s)
		if apierrors.IsNotFound(err) {
			log.FromContext(ctx).Info("imagePullSecret not found; verifying without it", "secret", name)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read imagePullSecret %s: %w", name, err)
		}
		secrets = append(secrets, imageverify.PullSecret{
			Name: name, DockerConfigJSON: s.Data[corev1.DockerConfigJsonKey], DockerCfg: s.Data[corev1.DockerConfigKey],
		})
	}
	return imageverify.NewKeychain(secrets)
}

func imageVerified(p *pass, pulled string, policy imageverify.Policy, res imageverify.Result) {
	now := &v1alpha1.ImageVerificationStatus{
		Image: values.SpecImage(p.cluster).String(), Digest: res.Digest, Policy: policy.ID(), Format: string(res.Format),
		VerifiedAt: metav1.NewTime(p.now),
	}
	if was := p.status.ImageVerification; was != nil && was.Image == now.Image && was.Digest == now.Digest && was.Policy == now.Policy {
		now.VerifiedAt = was.VerifiedAt // first verified then; status is not rewritten every pass
	} else {
		p.record("Normal", "ImageVerified", "Verify", fmt.Sprintf("%s is signed (%s); the servers run %s", pulled, res.Format, res.Digest))
	}
	p.status.ImageVerification = now
	p.setCondition(v1alpha1.ConditionImageVerified, true, v1alpha1.ReasonImageVerified,
		fmt.Sprintf("%s verified (%s format): the pod template pins %s", pulled, res.Format, res.Digest))
}

// imageFailed handles a failed verification by the failure policy. A
// registry that cannot be reached does not undo a digest verified earlier
// for the same image and policy: it stays pinned.
func imageFailed(p *pass, pulled string, policy imageverify.Policy, err error) error {
	spec := p.cluster.Spec.ImageVerification
	reason, msg := imageFailureReason(err), fmt.Sprintf("%s: %v", pulled, err)
	if was := p.status.ImageVerification; imageverify.Retryable(err) && was != nil &&
		was.Image == values.SpecImage(p.cluster).String() && was.Policy == policy.ID() {
		p.setCondition(v1alpha1.ConditionImageVerified, true, v1alpha1.ReasonImageVerifiedEarlier,
			fmt.Sprintf("%s was verified earlier as %s and stays pinned; checking again failed: %s", pulled, was.Digest, msg))
		p.requeueAfter(imageRetry)
		return nil
	}
	if imageverify.Retryable(err) {
		p.requeueAfter(imageRetry)
	}
	p.setCondition(v1alpha1.ConditionImageVerified, false, reason, msg)
	if spec.Warns() {
		p.status.ImageVerification = nil
		p.record("Warning", v1alpha1.ReasonImageVerificationFailed, "Verify",
			msg+"; failurePolicy Warn: the image is applied by its tag, unpinned")
		return nil
	}
	block := msg + "; failurePolicy Block: the StatefulSet is left as it is"
	p.degrade(v1alpha1.ReasonImageVerificationFailed, block)
	p.record("Warning", v1alpha1.ReasonImageVerificationFailed, "Verify", block)
	return errStop
}

// imageFailureReason is the ImageVerified reason of a failure.
func imageFailureReason(err error) string {
	for _, m := range []struct {
		err    error
		reason string
	}{
		{imageverify.ErrUnsigned, v1alpha1.ReasonImageUnsigned},
		{imageverify.ErrWrongKey, v1alpha1.ReasonImageSignatureInvalid},
		{imageverify.ErrWrongIdentity, v1alpha1.ReasonImageSignatureInvalid},
		{imageverify.ErrTampered, v1alpha1.ReasonImageSignatureInvalid},
		{imageverify.ErrRegistry, v1alpha1.ReasonImageRegistryUnreachable},
		{imageverify.ErrImageNotFound, v1alpha1.ReasonImageNotFound},
		{imageverify.ErrInvalidPolicy, v1alpha1.ReasonImageInvalidPolicy},
	} {
		if errors.Is(err, m.err) {
			return m.reason
		}
	}
	return v1alpha1.ReasonImageVerificationFailed
}
