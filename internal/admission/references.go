package admission

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/values"
)

// Kinds of the objects a spec may name.
const (
	KindSecret    = "Secret"
	KindConfigMap = "ConfigMap"
)

// Ref is one Secret or ConfigMap, in the object's namespace, that a spec
// names at Path. The operator reads it with its own rights, and mounts or
// sends what it holds where the spec says.
type Ref struct {
	Path *field.Path
	Kind string
	Name string
}

// NamedCluster is an OpenBaoCluster, in the object's namespace, that a
// spec names at Path, and whose keys, identity or data the operator then
// uses for the object: a bootstrap snapshot's source, or the cluster a
// backup or a restore acts on.
type NamedCluster struct {
	Path *field.Path
	Name string
}

// References is every Secret, ConfigMap and other cluster one object's
// spec names: what a SubjectAccessReview for its author covers, and what
// the managed-Secret rule looks at. TestEveryReferenceFieldIsListed fails
// when a field of the API types that names one is missing here.
type References struct {
	Objects  []Ref
	Clusters []NamedCluster
}

// ClusterReferences lists what an OpenBaoCluster's spec names. The
// bootstrap source is listed only when it is another cluster: a cluster
// restored under its own name names nothing but itself.
func ClusterReferences(c *v1alpha1.OpenBaoCluster) References {
	var refs References
	s := &c.Spec
	if b := s.Backup; b != nil {
		p := specPath.Child("backup")
		refs.secretKey(p.Child("tokenSecretRef"), b.TokenSecretRef)
		refs.target(p.Child("target"), &b.Target)
	}
	if fb := c.FromBackup(); fb != nil {
		p := specPath.Child("bootstrap", "fromBackup")
		refs.target(p.Child("target"), &fb.Target)
		refs.secretKey(p.Child("unsealKeySecretRef"), fb.UnsealKeySecretRef)
		refs.secretKey(p.Child("tokenSecretRef"), fb.TokenSecretRef)
		if fb.SourceCluster != "" && fb.SourceCluster != c.Name {
			refs.Clusters = append(refs.Clusters, NamedCluster{p.Child("sourceCluster"), fb.SourceCluster})
		}
	}
	// The External server Secret holds a private key the servers serve
	// and a CA the operator and the backup Jobs trust: its author must be
	// able to read it, and it may not be another cluster's TLS Secret.
	if ext := s.TLS.External; ext != nil {
		refs.add(specPath.Child("tls", "external", "serverSecretRef"), KindSecret, ext.ServerSecretRef.Name)
	}
	if a := s.TLS.ACME; a != nil {
		refs.secretKey(specPath.Child("tls", "acme", "caSecretRef"), a.CASecretRef)
	}
	refs.local(specPath.Child("unseal", "credentialsSecretRef"), KindSecret, s.Unseal.CredentialsSecretRef)
	refs.secretKey(specPath.Child("upgrade", "tokenSecretRef"), s.Upgrade.TokenSecretRef)
	if rk := c.RecoveryKeysOf(); rk != nil {
		refs.add(specPath.Child("rootToken", "recoveryKeys", "pgpKeysConfigMapRef"), KindConfigMap, rk.PGPKeysConfigMapRef.Name)
	}
	if in := s.Ingress; in != nil && in.TLSSecretName != "" {
		refs.add(specPath.Child("ingress", "tlsSecretName"), KindSecret, in.TLSSecretName)
	}
	if iv := s.ImageVerification; iv != nil && iv.Keyless != nil {
		refs.add(specPath.Child("imageVerification", "keyless", "trustedRootConfigMapRef"), KindConfigMap,
			iv.Keyless.TrustedRootConfigMapRef.Name)
	}
	// The servers' pull Secrets, which the kubelet uses for the spec's
	// image: typed, or inside the free-form spec.values.
	for i, ref := range s.ImagePullSecrets {
		refs.add(specPath.Child("imagePullSecrets").Index(i), KindSecret, ref.Name)
	}
	if len(s.ImagePullSecrets) == 0 {
		pulls, _ := values.PullSecretNames(c, values.Operator{})
		for i, name := range pulls {
			refs.add(specPath.Child("values", "imagePullSecrets").Index(i).Child("name"), KindSecret, name)
		}
	}
	return refs
}

// BackupReferences lists what an OpenBaoBackup names: the cluster it backs
// up. The store and the identity are that cluster's, listed with it.
func BackupReferences(b *v1alpha1.OpenBaoBackup) References {
	return References{Clusters: []NamedCluster{{specPath.Child("clusterName"), b.Spec.ClusterName}}}
}

// RestoreReferences lists what an OpenBaoRestore names: the cluster it
// restores into, whose store and identity it uses.
func RestoreReferences(r *v1alpha1.OpenBaoRestore) References {
	return References{Clusters: []NamedCluster{{specPath.Child("clusterName"), r.Spec.ClusterName}}}
}

// NewSince is what refs names that old did not name at the same path: on
// an update only those are checked, so that an object stored before a rule
// existed can still be relabelled or fixed one field at a time.
func (refs References) NewSince(old References) References {
	var out References
	for _, r := range refs.Objects {
		if !hasRef(old.Objects, r) {
			out.Objects = append(out.Objects, r)
		}
	}
	for _, n := range refs.Clusters {
		if !hasCluster(old.Clusters, n) {
			out.Clusters = append(out.Clusters, n)
		}
	}
	return out
}

func hasRef(refs []Ref, r Ref) bool {
	return slices.ContainsFunc(refs, func(o Ref) bool { return sameRef(o, r) })
}

func sameRef(a, b Ref) bool {
	return a.Path.String() == b.Path.String() && a.Kind == b.Kind && a.Name == b.Name
}

func hasCluster(clusters []NamedCluster, n NamedCluster) bool {
	return slices.ContainsFunc(clusters, func(o NamedCluster) bool { return o.Path.String() == n.Path.String() && o.Name == n.Name })
}

func (refs *References) target(p *field.Path, t *v1alpha1.BackupTarget) {
	refs.secretKey(p.Child("caSecretRef"), t.CASecretRef)
	refs.local(p.Child("credentialsSecretRef"), KindSecret, t.CredentialsSecretRef)
}

func (refs *References) secretKey(p *field.Path, r *v1alpha1.SecretKeyRef) {
	if r != nil {
		refs.add(p, KindSecret, r.Name)
	}
}

func (refs *References) local(p *field.Path, kind string, r *corev1.LocalObjectReference) {
	if r != nil {
		refs.add(p, kind, r.Name)
	}
}

func (refs *References) add(p *field.Path, kind, name string) {
	if name != "" {
		refs.Objects = append(refs.Objects, Ref{Path: p, Kind: kind, Name: name})
	}
}
