package controllers

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/openbao/operator/api/v1alpha1"
	decide "github.com/openbao/operator/internal/admission"
	"github.com/openbao/operator/internal/delegated"
	"github.com/openbao/operator/internal/imagepolicy"
)

// Paths of the validating webhook, as config/webhook names them.
const (
	ClusterWebhookPath = "/validate-openbao-org-v1alpha1-openbaocluster"
	BackupWebhookPath  = "/validate-openbao-org-v1alpha1-openbaobackup"
	RestoreWebhookPath = "/validate-openbao-org-v1alpha1-openbaorestore"
)

// The operator reads and updates its own webhook configuration only, for
// the CA bundle (WebhookCert).
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;update;patch,resourceNames=openbao-operator-validating-webhook

// Platform is what the platform sets when it installs the operator, and a
// tenant who may edit OpenBaoClusters cannot change: the repositories
// images come from, and the allow-list of fields the operator copies into
// its Pods, Services and Ingresses.
type Platform struct {
	Images imagepolicy.Policy
	Fields delegated.Policy
}

// SetupWebhooks registers the validating webhook of the three kinds on the
// manager's webhook server. Backups and restores read the cluster they
// name from the API server, not the cache: a cluster created a moment ago
// must count.
func SetupWebhooks(mgr ctrl.Manager, platform Platform) {
	reader := mgr.GetAPIReader()
	rules := referenceRules{reader: reader, reviews: mgr.GetClient()}
	srv := mgr.GetWebhookServer()
	scheme := mgr.GetScheme()
	srv.Register(ClusterWebhookPath, admission.WithValidator[*v1alpha1.OpenBaoCluster](scheme,
		clusterValidator{rules: rules, images: platform.Images, fields: platform.Fields}))
	srv.Register(BackupWebhookPath, admission.WithValidator[*v1alpha1.OpenBaoBackup](scheme, backupValidator{reader: reader, rules: rules}))
	srv.Register(RestoreWebhookPath, admission.WithValidator[*v1alpha1.OpenBaoRestore](scheme, restoreValidator{reader: reader, rules: rules}))
}

// clusterValidator checks a cluster's values, what its spec names against
// the author's rights and the managed-Secret rule, and its images against
// the platform's image policy, and the fields it hands the operator's
// Pods, Services and Ingresses against the platform's allow-list or the
// author's own rights.
type clusterValidator struct {
	rules  referenceRules
	images imagepolicy.Policy
	fields delegated.Policy
}

func (v clusterValidator) ValidateCreate(ctx context.Context, c *v1alpha1.OpenBaoCluster) (admission.Warnings, error) {
	return v.validate(ctx, nil, c)
}

func (v clusterValidator) ValidateUpdate(ctx context.Context, old, c *v1alpha1.OpenBaoCluster) (admission.Warnings, error) {
	return v.validate(ctx, old, c)
}

func (v clusterValidator) validate(ctx context.Context, old, c *v1alpha1.OpenBaoCluster) (admission.Warnings, error) {
	errs := append(decide.ValidateCluster(old, c), v.images.CheckChanged(old, c)...)
	refused, err := v.rules.cluster(ctx, old, c)
	if err != nil {
		return nil, err
	}
	base, err := v.rules.delegatedBase(ctx, old, c)
	if err != nil {
		return nil, err
	}
	delegatedErrs, err := v.rules.delegatedFields(ctx, c.Namespace, v.fields.OutsideChanged(base, c))
	if err != nil {
		return nil, err
	}
	grow, err := v.rules.storageSize(ctx, old, c)
	if err != nil {
		return nil, err
	}
	return nil, invalid("OpenBaoCluster", c.Name, append(append(append(errs, refused...), delegatedErrs...), grow...))
}

func (clusterValidator) ValidateDelete(context.Context, *v1alpha1.OpenBaoCluster) (admission.Warnings, error) {
	return nil, nil
}

// backupValidator checks creations only: the spec is immutable, and an
// update (a finalizer, a label) must go through after the cluster is gone.
// The author must be allowed to update the cluster it backs up.
type backupValidator struct {
	reader client.Reader
	rules  referenceRules
}

func (v backupValidator) ValidateCreate(ctx context.Context, b *v1alpha1.OpenBaoBackup) (admission.Warnings, error) {
	c, err := readCluster(ctx, v.reader, b.Namespace, b.Spec.ClusterName)
	if err != nil {
		return nil, err
	}
	denied, err := v.rules.authorMay(ctx, decide.AccessChecks(decide.BackupReferences(b), b.Namespace))
	if err != nil {
		return nil, err
	}
	return nil, invalid("OpenBaoBackup", b.Name, append(decide.ValidateBackup(b, c), denied...))
}

func (backupValidator) ValidateUpdate(context.Context, *v1alpha1.OpenBaoBackup, *v1alpha1.OpenBaoBackup) (admission.Warnings, error) {
	return nil, nil
}

func (backupValidator) ValidateDelete(context.Context, *v1alpha1.OpenBaoBackup) (admission.Warnings, error) {
	return nil, nil
}

// restoreValidator checks creations only, as backupValidator does; the
// author must be allowed to update the cluster whose data it overwrites.
type restoreValidator struct {
	reader client.Reader
	rules  referenceRules
}

func (v restoreValidator) ValidateCreate(ctx context.Context, r *v1alpha1.OpenBaoRestore) (admission.Warnings, error) {
	c, err := readCluster(ctx, v.reader, r.Namespace, r.Spec.ClusterName)
	if err != nil {
		return nil, err
	}
	denied, err := v.rules.authorMay(ctx, decide.AccessChecks(decide.RestoreReferences(r), r.Namespace))
	if err != nil {
		return nil, err
	}
	return nil, invalid("OpenBaoRestore", r.Name, append(decide.ValidateRestore(r, c), denied...))
}

func (restoreValidator) ValidateUpdate(context.Context, *v1alpha1.OpenBaoRestore, *v1alpha1.OpenBaoRestore) (admission.Warnings, error) {
	return nil, nil
}

func (restoreValidator) ValidateDelete(context.Context, *v1alpha1.OpenBaoRestore) (admission.Warnings, error) {
	return nil, nil
}

// readCluster returns the named cluster, nil when it does not exist.
func readCluster(ctx context.Context, reader client.Reader, namespace, name string) (*v1alpha1.OpenBaoCluster, error) {
	c := &v1alpha1.OpenBaoCluster{}
	err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, c)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read OpenBaoCluster %s: %w", name, err)
	}
	return c, nil
}

// invalid is the API server's 422 naming each field, or nil.
func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind(kind).GroupKind(), name, errs)
}
