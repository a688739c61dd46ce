package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OpenBaoTenantSpec names the namespaces a platform team hands to the
// operator.
type OpenBaoTenantSpec struct {
	// Namespaces the operator's controller may run OpenBao clusters in. The
	// provisioner binds the controller's tenant role in each; nowhere else
	// does the controller get rights on workloads or Secrets. The
	// operator's own namespace and the kube-* namespaces are refused.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.all(n, !n.startsWith('kube-'))",message="namespaces: the kube-* namespaces belong to Kubernetes and cannot be provisioned"
	// +listType=set
	Namespaces []string `json:"namespaces"`
}

// TenantNamespaceStatus is what the provisioner did in one namespace.
type TenantNamespaceStatus struct {
	// Name of the namespace.
	Name string `json:"name"`
	// Provisioned is true while the controller's RoleBinding is in place.
	Provisioned bool `json:"provisioned"`
	// Reason is Provisioned, NamespaceNotFound, NamespaceRefused,
	// ProvisioningFailed or Deprovisioning.
	Reason string `json:"reason"`
	// Message says what is wrong and what to do, when it is not
	// provisioned.
	// +optional
	Message string `json:"message,omitempty"`
}

// OpenBaoTenantStatus is the observed state of a tenant.
type OpenBaoTenantStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Namespaces is the state of each namespace the tenant holds or held:
	// a namespace dropped from the spec stays here until its RoleBinding
	// is removed.
	// +listType=map
	// +listMapKey=name
	// +optional
	Namespaces []TenantNamespaceStatus `json:"namespaces,omitempty"`
	// Conditions: Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// OpenBaoTenant hands namespaces to the operator: the provisioner binds the
// controller's tenant role in each, and the controller starts managing the
// OpenBaoClusters there. Removing a namespace, or the tenant, removes the
// binding.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=baotenant,categories=openbao
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Namespaces",type=string,JSONPath=`.spec.namespaces`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OpenBaoTenant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   OpenBaoTenantSpec   `json:"spec"`
	Status OpenBaoTenantStatus `json:"status,omitempty"`
}

// OpenBaoTenantList is a list of OpenBaoTenants.
// +kubebuilder:object:root=true
type OpenBaoTenantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OpenBaoTenant `json:"items"`
}

func init() {
	SchemeBuilder.Register(&OpenBaoTenant{}, &OpenBaoTenantList{})
}

// TenantKind is the API kind of OpenBaoTenant.
const TenantKind = "OpenBaoTenant"

// Tenant condition types and reasons.
const (
	// ConditionTenantReady (provisioner) is True when every namespace of
	// the spec is provisioned.
	ConditionTenantReady = "Ready"

	ReasonAllProvisioned     = "AllProvisioned"
	ReasonNotAllProvisioned  = "NotAllProvisioned"
	ReasonProvisioned        = "Provisioned"
	ReasonNamespaceNotFound  = "NamespaceNotFound"
	ReasonNamespaceRefused   = "NamespaceRefused"
	ReasonProvisioningFailed = "ProvisioningFailed"
	ReasonDeprovisioning     = "Deprovisioning"
)

// TenantFinalizer holds a tenant until its RoleBindings are released.
const TenantFinalizer = "openbao.org/tenant-rolebindings"

// ReasonNamespaceTerminating (tenant namespace status): the namespace is
// being deleted, and nothing can be provisioned in it.
const ReasonNamespaceTerminating = "NamespaceTerminating"

// ReasonNamespaceNotProvisioned (Degraded of an OpenBaoCluster): the
// operator runs with tenancy and no OpenBaoTenant has provisioned the
// cluster's namespace, so the controller holds no rights there.
const ReasonNamespaceNotProvisioned = "NamespaceNotProvisioned"
