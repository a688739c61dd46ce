// Package v1alpha1 holds the openbao.org/v1alpha1 API: the OpenBaoCluster
// resource that the operator turns into a running OpenBao cluster.
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
