package delegated_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/delegated"
)

var platform = delegated.Policy{
	PriorityClasses:    []string{"openbao"},
	TolerationKeys:     []string{"dedicated"},
	NodeSelectorKeys:   []string{"topology.kubernetes.io/zone"},
	AnnotationPrefixes: []string{"service.beta.kubernetes.io/aws-load-balancer-internal", "nginx.ingress.kubernetes.io/"},
	IngressClasses:     []string{"internal"},
}

func cluster(mutate func(s *v1alpha1.OpenBaoClusterSpec)) *v1alpha1.OpenBaoCluster {
	c := &v1alpha1.OpenBaoCluster{Spec: v1alpha1.OpenBaoClusterSpec{Version: "2.4.0"}}
	mutate(&c.Spec)
	return c
}

func ptr[T any](v T) *T { return &v }

func TestEachDelegatedFieldPassesOnlyWithinTheAllowList(t *testing.T) {
	tests := map[string]struct {
		mutate func(s *v1alpha1.OpenBaoClusterSpec)
		want   []string // "field kind"
	}{
		"a spec that sets none of them passes": {func(*v1alpha1.OpenBaoClusterSpec) {}, nil},
		"an allowed priority class passes":     {func(s *v1alpha1.OpenBaoClusterSpec) { s.PriorityClassName = "openbao" }, nil},
		"system-cluster-critical lands in Pods": {func(s *v1alpha1.OpenBaoClusterSpec) { s.PriorityClassName = "system-cluster-critical" },
			[]string{"spec.priorityClassName pods"}},
		"a toleration of an allowed key passes": {func(s *v1alpha1.OpenBaoClusterSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "dedicated", Value: "bao", Effect: corev1.TaintEffectNoSchedule}}
		}, nil},
		"a toleration of every taint is outside": {func(s *v1alpha1.OpenBaoClusterSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "dedicated"}, {Operator: corev1.TolerationOpExists}}
		}, []string{"spec.tolerations[1].key pods"}},
		"a node selector and node affinity on another key are outside": {func(s *v1alpha1.OpenBaoClusterSpec) {
			s.NodeSelector = map[string]string{"topology.kubernetes.io/zone": "a", "node-role.kubernetes.io/control-plane": ""}
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
					{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone"}, {Key: "pci"}}}}},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
					{Preference: corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name"}}}}},
			}}
		}, []string{
			"spec.nodeSelector[node-role.kubernetes.io/control-plane] pods",
			"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[1].key pods",
			"spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchFields[0].key pods",
		}},
		"a Service annotation outside every prefix lands in Services": {func(s *v1alpha1.OpenBaoClusterSpec) {
			s.Service.Annotations = map[string]string{
				"service.beta.kubernetes.io/aws-load-balancer-internal": "true",
				"service.beta.kubernetes.io/aws-load-balancer-scheme":   "internet-facing",
			}
		}, []string{"spec.service.annotations[service.beta.kubernetes.io/aws-load-balancer-scheme] services"}},
		"an Ingress's class and annotations land in Ingresses": {func(s *v1alpha1.OpenBaoClusterSpec) {
			s.Ingress = &v1alpha1.IngressSpec{Enabled: true, Host: "bao.example", ClassName: ptr("public"),
				Annotations: map[string]string{"nginx.ingress.kubernetes.io/ssl-passthrough": "true", "cert-manager.io/cluster-issuer": "x"}}
		}, []string{"spec.ingress.className ingresses.networking.k8s.io", "spec.ingress.annotations[cert-manager.io/cluster-issuer] ingresses.networking.k8s.io"}},
		"workload identity keys pass on both ServiceAccounts without the allow-list": {func(s *v1alpha1.OpenBaoClusterSpec) {
			s.ServiceAccount.Annotations = map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/r", "azure.workload.identity/client-id": "id"}
			s.Backup = &v1alpha1.BackupSpec{ServiceAccount: v1alpha1.ServiceAccountSpec{Annotations: map[string]string{"iam.gke.io/gcp-service-account": "b@p.iam.gserviceaccount.com"}}}
		}, nil},
		"another ServiceAccount annotation lands in ServiceAccounts unless a prefix allows it": {func(s *v1alpha1.OpenBaoClusterSpec) {
			s.ServiceAccount.Annotations = map[string]string{"kubernetes.io/enforce-mountable-secrets": "true", "nginx.ingress.kubernetes.io/x": "y"}
			s.Backup = &v1alpha1.BackupSpec{ServiceAccount: v1alpha1.ServiceAccountSpec{Annotations: map[string]string{"eks.amazonaws.com/role-arn-x": "r"}}}
		}, []string{"spec.serviceAccount.annotations[kubernetes.io/enforce-mountable-secrets] serviceaccounts",
			"spec.backup.serviceAccount.annotations[eks.amazonaws.com/role-arn-x] serviceaccounts"}},
		"a disabled Ingress creates nothing and is not checked": {func(s *v1alpha1.OpenBaoClusterSpec) {
			s.Ingress = &v1alpha1.IngressSpec{ClassName: ptr("public"), Annotations: map[string]string{"a": "b"}}
		}, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, f := range platform.Outside(cluster(tc.mutate)) {
				got = append(got, f.Path.String()+" "+f.Kind.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Outside:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestTheRefusalNamesTheFieldTheRuleTheFlagAndWhatIsAllowed(t *testing.T) {
	f := platform.Outside(cluster(func(s *v1alpha1.OpenBaoClusterSpec) { s.PriorityClassName = "system-node-critical" }))
	if len(f) != 1 {
		t.Fatalf("findings %v", f)
	}
	msg := f[0].Error("attacker@a").Error()
	for _, want := range []string{"spec.priorityClassName", delegated.Rule, "--allowed-priority-classes", "allowed: openbao", "attacker@a may not create pods"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not name %q", msg, want)
		}
	}
	if msg := (delegated.Policy{}).Outside(cluster(func(s *v1alpha1.OpenBaoClusterSpec) { s.PriorityClassName = "x" }))[0].Error("").Error(); !strings.Contains(msg, "allowed: none") {
		t.Errorf("an empty allow-list: %q", msg)
	}
}

func TestAnUpdateIsAskedOnlyAboutValuesSetAnew(t *testing.T) {
	old := cluster(func(s *v1alpha1.OpenBaoClusterSpec) {
		s.PriorityClassName = "high"
		s.NodeSelector = map[string]string{"pci": "true"}
	})
	c := old.DeepCopy()
	c.Labels = map[string]string{"team": "a"}
	if got := platform.OutsideChanged(old, c); len(got) != 0 {
		t.Errorf("a relabelled cluster: %v", got)
	}
	c.Spec.PriorityClassName = "higher"
	c.Spec.NodeSelector["gpu"] = "true"
	var got []string
	for _, f := range platform.OutsideChanged(old, c) {
		got = append(got, f.Path.String())
	}
	if want := []string{"spec.priorityClassName", "spec.nodeSelector[gpu]"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// FuzzNothingOutsideTheAllowListPasses: whatever the keys, a toleration,
// node selector key or annotation passes only when the allow-list holds
// it (by prefix for annotations), and then is never reported.
func FuzzNothingOutsideTheAllowListPasses(f *testing.F) {
	f.Add("dedicated", "dedicated", "nginx.ingress.kubernetes.io/x", "nginx.ingress.kubernetes.io/")
	f.Add("", "dedicated", "a", "")
	f.Fuzz(func(t *testing.T, key, allowedKey, annotation, prefix string) {
		p := delegated.Policy{TolerationKeys: delegated.ParseList(allowedKey), NodeSelectorKeys: delegated.ParseList(allowedKey),
			AnnotationPrefixes: delegated.ParseList(prefix)}
		c := cluster(func(s *v1alpha1.OpenBaoClusterSpec) {
			s.Tolerations = []corev1.Toleration{{Key: key}}
			s.NodeSelector = map[string]string{key: "x"}
			s.Service.Annotations = map[string]string{annotation: "x"}
		})
		reported := map[string]bool{}
		for _, f := range p.Outside(c) {
			reported[f.Path.String()] = true
		}
		keyAllowed := key != "" && slices.Contains(p.TolerationKeys, key)
		if reported["spec.tolerations[0].key"] == keyAllowed {
			t.Errorf("toleration %q under %q: reported %v", key, p.TolerationKeys, !keyAllowed)
		}
		annAllowed := slices.ContainsFunc(p.AnnotationPrefixes, func(pre string) bool { return strings.HasPrefix(annotation, pre) })
		annReported := false
		for path := range reported {
			annReported = annReported || strings.HasPrefix(path, "spec.service.annotations")
		}
		if annReported == annAllowed {
			t.Errorf("annotation %q under %q: reported %v", annotation, p.AnnotationPrefixes, annReported)
		}
	})
}

func TestAServiceAccountRefusalNamesTheFieldAndTheWorkloadIdentityKeys(t *testing.T) {
	f := platform.Outside(cluster(func(s *v1alpha1.OpenBaoClusterSpec) {
		s.ServiceAccount.Annotations = map[string]string{"example.com/steer": "x"}
	}))
	if len(f) != 1 {
		t.Fatalf("findings %v", f)
	}
	msg := f[0].Error("tenant@a").Error()
	for _, want := range []string{"spec.serviceAccount.annotations[example.com/steer]", "--allowed-annotation-prefixes",
		"eks.amazonaws.com/role-arn", "iam.gke.io/gcp-service-account", "azure.workload.identity/client-id", "tenant@a may not create serviceaccounts"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not name %q", msg, want)
		}
	}
}

func TestOnlyAnAzureClientIDLabelsThePods(t *testing.T) {
	if got := delegated.PodLabels(map[string]string{delegated.AzureClientIDKey: "id"}); got[delegated.AzureUseLabel] != "true" {
		t.Errorf("Azure client-id: %v", got)
	}
	if got := delegated.PodLabels(map[string]string{"eks.amazonaws.com/role-arn": "r"}); len(got) != 0 {
		t.Errorf("IRSA: %v", got)
	}
}
