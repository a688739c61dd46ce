// Package v1alpha1 holds the openbao.org/v1alpha1 API: the OpenBaoCluster
// resource that the operator turns into a running OpenBao cluster.
//
// One spelling for one idea:
//   - An enum value the operator defines is UpperCamel, as Kubernetes
//     spells its own (OperatorManaged, DeletePVCs, Keep, S3). A value that
//     OpenBao defines and that goes into config.hcl as written keeps
//     OpenBao's spelling (unseal.type static or awskms, self-init request
//     operations, tls12, the log level and format); each such field's
//     comment says "OpenBao's own name ..., as written in config.hcl".
//     TestOperatorEnumsAreUpperCamel checks the rule.
//   - A field that names a Secret for one value is a SecretKeyRef (name,
//     and a key with a documented default: "token" for every
//     tokenSecretRef); a Secret whose several keys are documented is a
//     LocalObjectReference (credentialsSecretRef).
//   - A Google service account's JSON key file is the key
//     credentials.json wherever a Secret holds one.
//   - A jwtAuthRole defaults to the role the operator creates for the task
//     (upgrade, backup); LoginRole decides it for every reader.
//
// +kubebuilder:object:generate=true
// +groupName=openbao.org
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of this package's kinds.
	GroupVersion = schema.GroupVersion{Group: "openbao.org", Version: "v1alpha1"}

	// SchemeBuilder registers this package's kinds with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this package's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
