package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	return p.hold(v1alpha1.ReasonImageNotAllowed, "ImagePolicy", errs.ToAggregate().Error())
}

// reconcileImage owns ImageVerified and status.imageVerification: with
// the platform's signature policy (--image-signature-*) or
// spec.imageVerification on, it verifies the image the servers pull
// before anything of the StatefulSet is written, and leaves the verified
// digest in status, which the chart pins. The platform's policy is checked
// first and always blocks; the spec's adds its own check of the same
// digest and cannot remove the platform's. A failure that blocks ends the
// pass here, so the StatefulSet and its running pods stay as they are;
// under the spec's Warn, a failure of the spec's own check lets the pass
// go on with the image by its tag.
func (r *OpenBaoClusterReconciler) reconcileImage(ctx context.Context, p *pass) error {
	spec := p.cluster.Spec.ImageVerification
	platform := r.PlatformVerification
	if !spec.Verifies() && platform == nil {
		p.status.ImageVerification = nil
		meta.RemoveStatusCondition(&p.status.Conditions, v1alpha1.ConditionImageVerified)
		return nil
	}
	if r.ImageVerifier == nil {
		return errors.New("image verification is on but this operator has no image verifier")
	}
	var policies []imageverify.Policy
	if platform != nil {
		policies = append(policies, platform.Policy)
		p.platformVerified = true
	}
	var err error
	if spec.Verifies() {
		var own imageverify.Policy
		own, err = r.imagePolicy(ctx, p.cluster)
		policies = append(policies, own)
	}
	var kc authn.Keychain
	if err == nil {
		kc, err = r.pullKeychain(ctx, p.cluster)
	}
	if err != nil && !errors.Is(err, imageverify.ErrInvalidPolicy) {
		return err
	}
	pulled := values.PulledImage(p.cluster, r.Operator)
	specBlocks := !spec.Verifies() || !spec.Warns()
	v := verification{image: pulled, policy: policiesID(policies), blocks: platform != nil || specBlocks}
	var res imageverify.Result
	if err == nil {
		res, v.blocks, err = r.verifyImageAll(ctx, kc, pulled, policies, platform != nil, specBlocks)
	}
	if err == nil {
		imageVerified(p, v, res)
		return nil
	}
	if errors.Is(err, errTrustedRootMissing) {
		// Nothing watches the ConfigMap: look again for it.
		p.requeueAfter(imageRetry)
	}
	return imageFailed(p, v, res, err)
}

// verification is one image checked under the platform's and the spec's
// policies: what a failure of it does.
type verification struct {
	image  string
	policy string // policiesID
	// blocks: a failure holds the StatefulSet as it is (the platform's
	// check, or the spec's under Block); else it only warns.
	blocks bool
}

// policiesID identifies the policies an image was verified against, in
// order, for status: a change of either verifies again.
func policiesID(policies []imageverify.Policy) string {
	ids := make([]string, len(policies))
	for i, p := range policies {
		ids[i] = p.ID()
	}
	return strings.Join(ids, "+")
}

// verifyImageAll verifies image against each policy in turn, the later
// ones by the digest the first resolved, so that every policy checks the
// same manifest. blocks says whether the failed check was one that blocks:
// the first when platform is set, else by the spec's failure policy. On a
// failure, the result is the platform's when its check passed.
func (r *OpenBaoClusterReconciler) verifyImageAll(ctx context.Context, kc authn.Keychain, image string, policies []imageverify.Policy,
	platform, specBlocks bool) (imageverify.Result, bool, error) {
	var first imageverify.Result
	for i, policy := range policies {
		ref := image
		if i > 0 {
			ref = pinned(image, first.Digest)
		}
		res, err := r.verifyImage(ctx, kc, ref, policy)
		if err != nil {
			blocks := specBlocks
			if platform && i == 0 {
				blocks, err = true, fmt.Errorf("the platform's signature policy (--image-signature-*): %w", err)
			}
			return first, blocks, err
		}
		if i == 0 {
			first = res
		}
	}
	return first, true, nil
}

// pinned names image (repository:tag or repository@digest) by digest.
func pinned(image, digest string) string {
	if at := strings.LastIndex(image, "@"); at >= 0 {
		image = image[:at]
	}
	if slash, colon := strings.LastIndex(image, "/"), strings.LastIndex(image, ":"); colon > slash {
		image = image[:colon]
	}
	return image + "@" + digest
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

// pullKeychain reads the imagePullSecrets the chart gives the servers.
func (r *OpenBaoClusterReconciler) pullKeychain(ctx context.Context, c *v1alpha1.OpenBaoCluster) (authn.Keychain, error) {
	return pullKeychain(ctx, r.APIReader, c, r.Operator)
}

// pullKeychain reads the imagePullSecrets the chart gives the servers; a
// missing one is skipped, as the kubelet does. Unusable secrets are
// ErrInvalidPolicy; other errors are the API server's.
func pullKeychain(ctx context.Context, reader client.Reader, c *v1alpha1.OpenBaoCluster, op values.Operator) (authn.Keychain, error) {
	names, err := values.PullSecretNames(c, op)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", imageverify.ErrInvalidPolicy, err)
	}
	var secrets []imageverify.PullSecret
	for _, name := range names {
		s := &corev1.Secret{}
		err := reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, s)
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

// pinExecutorImage verifies the executor image a tenant names
// (spec.backup.executorImage) under the platform's signature policy and
// returns the cluster with it named by the verified digest, which the
// Job then runs. Without the policy, or without an executorImage (the
// operator's own image, which the platform installed and which runs
// pinned by the digest the operator's pod runs), c is returned as it is.
// The backup and restore reconcilers both call it before a Job is made.
func pinExecutorImage(ctx context.Context, verifier imageverify.Verifier, platform *PlatformVerification, reader client.Reader,
	c *v1alpha1.OpenBaoCluster) (*v1alpha1.OpenBaoCluster, error) {
	if platform == nil || c.Spec.Backup == nil || c.Spec.Backup.ExecutorImage == "" {
		return c, nil
	}
	if verifier == nil {
		return nil, errors.New("the platform requires image signatures but this operator has no image verifier")
	}
	image := c.Spec.Backup.ExecutorImage
	kc, err := pullKeychain(ctx, reader, c, values.Operator{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, imageVerifyTimeout)
	defer cancel()
	res, err := verifier.Verify(ctx, imageverify.Request{Image: image, Policy: platform.Policy, Keychain: kc})
	if err != nil {
		return nil, fmt.Errorf("spec.backup.executorImage %s under the platform's signature policy (--image-signature-*): %w", image, err)
	}
	pinnedCluster := c.DeepCopy()
	pinnedCluster.Spec.Backup.ExecutorImage = pinned(image, res.Digest)
	return pinnedCluster, nil
}

func imageVerified(p *pass, v verification, res imageverify.Result) {
	pulled := v.image
	now := &v1alpha1.ImageVerificationStatus{
		Image: values.SpecImage(p.cluster).String(), Digest: res.Digest, Policy: v.policy, Format: string(res.Format),
		VerifiedAt: metav1.NewTime(p.now),
	}
	if was := p.status.ImageVerification; was != nil && was.Image == now.Image && was.Digest == now.Digest && was.Policy == now.Policy {
		now.VerifiedAt = was.VerifiedAt // first verified then; status is not rewritten every pass
	} else {
		p.record("Normal", "ImageVerified", "Verify", fmt.Sprintf("%s is signed (%s); the servers run %s", pulled, res.Format, res.Digest))
	}
	p.status.ImageVerification = now
	p.setCondition(v1alpha1.ConditionImageVerified, true, v1alpha1.ReasonVerified,
		fmt.Sprintf("%s verified (%s format): the pod template pins %s", pulled, res.Format, res.Digest))
}

// imageFailed handles a failed verification by whether it blocks. A
// registry that cannot be reached does not undo a digest verified earlier
// for the same image and policies: it stays pinned.
func imageFailed(p *pass, v verification, platform imageverify.Result, err error) error {
	pulled := v.image
	reason, msg := imageFailureReason(err), fmt.Sprintf("%s: %v", pulled, err)
	if was := p.status.ImageVerification; imageverify.Retryable(err) && was != nil &&
		was.Image == values.SpecImage(p.cluster).String() && was.Policy == v.policy {
		p.setCondition(v1alpha1.ConditionImageVerified, true, v1alpha1.ReasonVerifiedEarlier,
			fmt.Sprintf("%s was verified earlier as %s and stays pinned; checking again failed: %s", pulled, was.Digest, msg))
		p.requeueAfter(imageRetry)
		return nil
	}
	if imageverify.Retryable(err) {
		p.requeueAfter(imageRetry)
	}
	p.setCondition(v1alpha1.ConditionImageVerified, false, reason, msg)
	if !v.blocks && platform.Digest != "" {
		// The spec's own check failed under Warn, the platform's passed:
		// the digest the platform verified stays pinned, never the tag.
		p.status.ImageVerification = &v1alpha1.ImageVerificationStatus{
			Image: values.SpecImage(p.cluster).String(), Digest: platform.Digest, Policy: v.policy,
			Format: string(platform.Format), VerifiedAt: metav1.NewTime(p.now),
		}
		p.record("Warning", v1alpha1.ReasonImageVerificationFailed, "Verify",
			msg+"; failurePolicy Warn: the image runs by the digest the platform's policy verified, "+platform.Digest)
		return nil
	}
	if !v.blocks {
		p.status.ImageVerification = nil
		p.record("Warning", v1alpha1.ReasonImageVerificationFailed, "Verify",
			msg+"; failurePolicy Warn: the image is applied by its tag, unpinned")
		return nil
	}
	return p.hold(v1alpha1.ReasonImageVerificationFailed, "Verify", msg+"; the StatefulSet is left as it is")
}

// imageFailureReason is the ImageVerified reason of a failure.
func imageFailureReason(err error) string {
	for _, m := range []struct {
		err    error
		reason string
	}{
		{imageverify.ErrUnsigned, v1alpha1.ReasonUnsigned},
		{imageverify.ErrWrongKey, v1alpha1.ReasonSignatureInvalid},
		{imageverify.ErrWrongIdentity, v1alpha1.ReasonSignatureInvalid},
		{imageverify.ErrTampered, v1alpha1.ReasonSignatureInvalid},
		{imageverify.ErrRegistry, v1alpha1.ReasonRegistryUnreachable},
		{imageverify.ErrImageNotFound, v1alpha1.ReasonImageNotFound},
		{imageverify.ErrInvalidPolicy, v1alpha1.ReasonInvalidPolicy},
	} {
		if errors.Is(err, m.err) {
			return m.reason
		}
	}
	return v1alpha1.ReasonImageVerificationFailed
}

// PlatformVerification is the platform's signature policy, set when the
// operator is installed (--image-signature-public-key-file, or the keyless
// --image-signature-issuer, subject and trusted root): the servers' image
// of every cluster, drill copies included, and every executor image a
// tenant names are verified against it, whatever spec.imageVerification
// says, and a failure always blocks. A tenant's own imageVerification
// adds its check; it cannot remove this one.
type PlatformVerification struct {
	Policy imageverify.Policy
}
