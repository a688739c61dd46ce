package helmcharts_test

import (
	"bytes"
	"maps"
	"os"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/values"
)

// installed is what the chart renders for values, decoded: the built-in
// kinds as their Go types, keyed by kind and name.
type installed map[string]any

func render(t *testing.T, values map[string]any) installed {
	t.Helper()
	out := installed{}
	decoder := serializer.NewCodecFactory(scheme.Scheme).UniversalDeserializer()
	for _, doc := range bytes.Split(renderOperatorChart(t, loadOperatorChart(t), values), []byte("\n---\n")) {
		doc = bytes.TrimPrefix(doc, []byte("---\n"))
		var meta struct {
			Kind     string
			Metadata struct{ Name string }
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Kind == "ServiceMonitor" || meta.Kind == "PrometheusRule" {
			var u map[string]any
			if err := yaml.Unmarshal(doc, &u); err != nil {
				t.Fatal(err)
			}
			out[meta.Kind+"/"+meta.Metadata.Name] = u
			continue
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("decode %s/%s: %v", meta.Kind, meta.Metadata.Name, err)
		}
		out[meta.Kind+"/"+meta.Metadata.Name] = obj
	}
	return out
}

func (in installed) deployment(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	d, ok := in["Deployment/"+name].(*appsv1.Deployment)
	if !ok {
		t.Fatalf("no Deployment %s", name)
	}
	return d
}

func (in installed) manager(t *testing.T) *appsv1.Deployment {
	return in.deployment(t, "openbao-operator-controller-manager")
}

func container(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %s", d.Name, name)
	return corev1.Container{}
}

// TestThePodValuesReachTheManagerAndTheProvisioner: each pod value lands
// in both Deployments' pod templates (the manager's only, for affinity,
// spread and extraEnv), and the chart's own labels win over podLabels, so
// the Deployments' selectors keep selecting their pods.
func TestThePodValuesReachTheManagerAndTheProvisioner(t *testing.T) {
	env := corev1.EnvVar{Name: "GOMEMLIMIT", Value: "200MiB"}
	spread := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone",
		WhenUnsatisfiable: corev1.ScheduleAnyway}
	toleration := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	runAs := int64(65532)
	in := render(t, map[string]any{
		"tenancy":                   map[string]any{"enabled": true},
		"extraEnv":                  []any{map[string]any{"name": env.Name, "value": env.Value}},
		"podLabels":                 map[string]any{"cost-center": "platform", "app.kubernetes.io/name": "mine"},
		"podAnnotations":            map[string]any{"example.com/owner": "platform"},
		"priorityClassName":         "openbao-operator",
		"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "topologyKey": spread.TopologyKey, "whenUnsatisfiable": "ScheduleAnyway"}},
		"nodeSelector":              map[string]any{"node-role.example.com/platform": "true"},
		"tolerations":               []any{map[string]any{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}},
		"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
			"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "kubernetes.io/arch", "operator": "In", "values": []any{"amd64"}}}}}}}},
		"podSecurityContext": map[string]any{"runAsNonRoot": true, "runAsUser": runAs, "seccompProfile": map[string]any{"type": "RuntimeDefault"}},
		"securityContext":    map[string]any{"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsUser": runAs, "capabilities": map[string]any{"drop": []any{"ALL"}}},
	})
	manager, provisioner := in.manager(t), in.deployment(t, "openbao-operator-provisioner")
	for _, d := range []*appsv1.Deployment{manager, provisioner} {
		pod := d.Spec.Template
		if pod.Labels["cost-center"] != "platform" || pod.Labels["app.kubernetes.io/name"] != "openbao-operator" {
			t.Errorf("%s: pod labels %v, want cost-center=platform and the chart's name", d.Name, pod.Labels)
		}
		selector, err := metav1LabelSelector(d)
		if err != nil || !selector.Matches(labels.Set(pod.Labels)) {
			t.Errorf("%s: the selector %v does not select its pods' labels %v", d.Name, d.Spec.Selector, pod.Labels)
		}
		if pod.Annotations["example.com/owner"] != "platform" {
			t.Errorf("%s: pod annotations %v", d.Name, pod.Annotations)
		}
		if pod.Spec.PriorityClassName != "openbao-operator" {
			t.Errorf("%s: priorityClassName %q", d.Name, pod.Spec.PriorityClassName)
		}
		if pod.Spec.NodeSelector["node-role.example.com/platform"] != "true" || !reflect.DeepEqual(pod.Spec.Tolerations, []corev1.Toleration{toleration}) {
			t.Errorf("%s: nodeSelector %v, tolerations %v", d.Name, pod.Spec.NodeSelector, pod.Spec.Tolerations)
		}
		if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != runAs {
			t.Errorf("%s: the pod securityContext is %+v, want podSecurityContext's", d.Name, sc)
		}
		if sc := d.Spec.Template.Spec.Containers[0].SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != runAs {
			t.Errorf("%s: the container securityContext is %+v, want securityContext's", d.Name, sc)
		}
	}
	if a := manager.Spec.Template.Spec.Affinity; a == nil || a.NodeAffinity == nil {
		t.Errorf("the manager has no node affinity: %+v", a)
	}
	if got := manager.Spec.Template.Spec.TopologySpreadConstraints; !reflect.DeepEqual(got, []corev1.TopologySpreadConstraint{spread}) {
		t.Errorf("topologySpreadConstraints %+v", got)
	}
	managerEnv := container(t, manager, "manager").Env
	if last := managerEnv[len(managerEnv)-1]; !reflect.DeepEqual(last, env) {
		t.Errorf("the manager's last variable is %+v, want extraEnv's %+v", last, env)
	}
	if !containsEnv(managerEnv, "WRAPPER_IMAGE") || !containsEnv(managerEnv, "POD_NAME") {
		t.Errorf("extraEnv replaced the chart's own variables: %+v", managerEnv)
	}
}

func containsEnv(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

func metav1LabelSelector(d *appsv1.Deployment) (labels.Selector, error) {
	return labels.ValidatedSelectorFromSet(d.Spec.Selector.MatchLabels)
}

// TestTheDefaultSecurityContextsAreRestricted: the defaults are the
// restricted Pod Security level's, as the chart has always rendered them.
func TestTheDefaultSecurityContextsAreRestricted(t *testing.T) {
	d := render(t, nil).manager(t)
	pod := d.Spec.Template.Spec.SecurityContext
	if pod == nil || pod.RunAsNonRoot == nil || !*pod.RunAsNonRoot || pod.SeccompProfile == nil ||
		pod.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("the pod securityContext is %+v", pod)
	}
	c := container(t, d, "manager").SecurityContext
	if c == nil || c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation || c.ReadOnlyRootFilesystem == nil ||
		!*c.ReadOnlyRootFilesystem || c.Capabilities == nil || !reflect.DeepEqual(c.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("the container securityContext is %+v", c)
	}
}

// TestTheServiceAccountCarriesItsAnnotationsOrIsLeftToTheUser: the
// annotations cloud workload identity reads, and create=false for an
// account made elsewhere (under the same name, which the rest binds).
func TestTheServiceAccountCarriesItsAnnotationsOrIsLeftToTheUser(t *testing.T) {
	arn := map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/openbao-operator"}
	in := render(t, map[string]any{"serviceAccount": map[string]any{"annotations": map[string]any{"eks.amazonaws.com/role-arn": arn["eks.amazonaws.com/role-arn"]}}})
	sa, ok := in["ServiceAccount/openbao-operator-controller-manager"].(*corev1.ServiceAccount)
	if !ok || !maps.Equal(sa.Annotations, arn) {
		t.Fatalf("the manager's ServiceAccount is %+v, want annotations %v", sa, arn)
	}
	in = render(t, map[string]any{"serviceAccount": map[string]any{"create": false}})
	if _, ok := in["ServiceAccount/openbao-operator-controller-manager"]; ok {
		t.Error("serviceAccount.create=false still renders the ServiceAccount")
	}
	if got := in.manager(t).Spec.Template.Spec.ServiceAccountName; got != "openbao-operator-controller-manager" {
		t.Errorf("the manager runs as %q", got)
	}
}

// TestASecondManagerGetsADisruptionBudgetAndNeedsLeaderElection: with
// more than one replica a drain keeps one manager (minAvailable 1, over
// exactly the manager's pods); with one, no budget blocks the drain; and
// two managers without leader election are refused.
func TestASecondManagerGetsADisruptionBudgetAndNeedsLeaderElection(t *testing.T) {
	if _, ok := render(t, nil)["PodDisruptionBudget/openbao-operator-controller-manager"]; ok {
		t.Error("one manager renders a PodDisruptionBudget, which would block every drain of its node")
	}
	in := render(t, map[string]any{"replicaCount": 2})
	d := in.manager(t)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 || !strings.Contains(strings.Join(container(t, d, "manager").Args, " "), "--leader-elect") {
		t.Errorf("replicas %v, args %v: want 2 with --leader-elect", d.Spec.Replicas, container(t, d, "manager").Args)
	}
	pdb, ok := in["PodDisruptionBudget/openbao-operator-controller-manager"].(*policyv1.PodDisruptionBudget)
	if !ok {
		t.Fatal("two managers render no PodDisruptionBudget")
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("the budget is %+v, want minAvailable 1", pdb.Spec)
	}
	if !reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels) {
		t.Errorf("the budget selects %v, the Deployment %v", pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels)
	}
	err := renderErr(map[string]any{"replicaCount": 2, "leaderElection": false})
	if err == nil || !strings.Contains(err.Error(), "leaderElection") {
		t.Errorf("two managers without leader election: %v, want an error naming leaderElection", err)
	}
}

// TestTheRegistryMirrorRewritesEveryImageTheChartNames: with
// global.imageRegistry every image of every Deployment, the wrapper image
// the manager hands OpenBao pods and the OpenBao servers' default image
// come from the mirror, with their path, tag and digest kept.
func TestTheRegistryMirrorRewritesEveryImageTheChartNames(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cases := map[string]struct {
		registry, repository, wrapper          string
		wantOperator, wantWrapper, wantOpenBao string
	}{
		"a host is replaced, the digest kept": {"mirror.corp.example", "ghcr.io/openbao/openbao-operator", "ghcr.io/openbao/bao-wrapper",
			"mirror.corp.example/openbao/openbao-operator@" + digest, "mirror.corp.example/openbao/bao-wrapper:1.1.1",
			"mirror.corp.example/openbao/openbao:2.4.0"},
		"a host with a port and a path prefix": {"mirror.corp.example:5000/ghcr/", "ghcr.io/openbao/openbao-operator", "localhost:5000/bao-wrapper",
			"mirror.corp.example:5000/ghcr/openbao/openbao-operator@" + digest, "mirror.corp.example:5000/ghcr/bao-wrapper:1.1.1",
			"mirror.corp.example:5000/ghcr/openbao/openbao:2.4.0"},
		"localhost is a host": {"registry.local", "localhost/openbao-operator", "localhost/bao-wrapper",
			"registry.local/openbao-operator@" + digest, "registry.local/bao-wrapper:1.1.1", "registry.local/openbao/openbao:2.4.0"},
		"a Docker Hub name gets the mirror in front": {"registry.local", "openbao/openbao-operator", "bao-wrapper",
			"registry.local/openbao/openbao-operator@" + digest, "registry.local/bao-wrapper:1.1.1", "registry.local/openbao/openbao:2.4.0"},
		"no mirror leaves the images alone": {"", "ghcr.io/openbao/openbao-operator", "ghcr.io/openbao/bao-wrapper",
			"ghcr.io/openbao/openbao-operator@" + digest, "ghcr.io/openbao/bao-wrapper:1.1.1", "quay.io/openbao/openbao:2.4.0"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := render(t, map[string]any{
				"global":  map[string]any{"imageRegistry": tc.registry},
				"image":   map[string]any{"repository": tc.repository, "digest": digest},
				"wrapper": map[string]any{"image": map[string]any{"repository": tc.wrapper}},
				"tenancy": map[string]any{"enabled": true},
			})
			for key, obj := range in {
				d, ok := obj.(*appsv1.Deployment)
				if !ok {
					continue
				}
				for _, c := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
					if c.Image != tc.wantOperator {
						t.Errorf("%s container %s runs %s, want %s", key, c.Name, c.Image, tc.wantOperator)
					}
				}
			}
			mirror := ""
			for _, e := range container(t, in.manager(t), "manager").Env {
				if e.Name == "WRAPPER_IMAGE" && e.Value != tc.wantWrapper {
					t.Errorf("WRAPPER_IMAGE is %s, want %s", e.Value, tc.wantWrapper)
				}
				if e.Name == "OPENBAO_IMAGE_REGISTRY" {
					mirror = e.Value
				}
			}
			// The servers' image: the manager hands OPENBAO_IMAGE_REGISTRY to
			// the cluster chart as imageRegistry (watches.yaml).
			cluster := &v1alpha1.OpenBaoCluster{Spec: v1alpha1.OpenBaoClusterSpec{Version: "2.4.0"}}
			got := values.PulledImage(cluster, values.Operator{OverrideValues: map[string]any{"imageRegistry": mirror}})
			if got != tc.wantOpenBao {
				t.Errorf("the servers pull %s, want %s", got, tc.wantOpenBao)
			}
		})
	}
}

// TestTheLogLevelIsTheManagersZapLevel: logLevel becomes --zap-log-level
// (cmd/openbao-operator checks the manager takes every flag the chart
// renders); info, the manager's default, adds no flag.
func TestTheLogLevelIsTheManagersZapLevel(t *testing.T) {
	for level, want := range map[any]string{"debug": "--zap-log-level=debug", 3: "--zap-log-level=3", "info": ""} {
		args := strings.Join(container(t, render(t, map[string]any{"logLevel": level}).manager(t), "manager").Args, " ")
		if got := strings.Contains(args, "--zap-log-level"); got != (want != "") || !strings.Contains(args, want) {
			t.Errorf("logLevel %v: args %s, want %q", level, args, want)
		}
	}
}

// TestTheServiceMonitorScrapesWithATokenBoundToTheMetricsReader: with the
// default secure metrics the manager answers only a token allowed to GET
// /metrics. The ServiceMonitor's endpoint names a Secret the chart renders,
// of type service-account-token for a ServiceAccount the chart renders,
// which a ClusterRoleBinding gives openbao-operator-metrics-reader, whose
// one rule is that GET. (test/envtest scrapes the manager with that
// Secret's token on a real API server.)
func TestTheServiceMonitorScrapesWithATokenBoundToTheMetricsReader(t *testing.T) {
	in := render(t, map[string]any{"serviceMonitor": map[string]any{"enabled": true}})
	sm, ok := in["ServiceMonitor/openbao-operator"].(map[string]any)
	if !ok {
		t.Fatal("no ServiceMonitor")
	}
	endpoints, _ := sm["spec"].(map[string]any)["endpoints"].([]any)
	if len(endpoints) != 1 {
		t.Fatalf("endpoints %v", endpoints)
	}
	var endpoint struct {
		Scheme        string
		Authorization struct {
			Type        string
			Credentials struct{ Name, Key string }
		}
	}
	remarshal(t, endpoints[0], &endpoint)
	if endpoint.Scheme != "https" || endpoint.Authorization.Type != "Bearer" {
		t.Fatalf("the endpoint %+v does not send a bearer token over https", endpoints[0])
	}
	secret, ok := in["Secret/"+endpoint.Authorization.Credentials.Name].(*corev1.Secret)
	if !ok || secret.Namespace != namespace {
		t.Fatalf("the endpoint's token Secret %q is not rendered in %s", endpoint.Authorization.Credentials.Name, namespace)
	}
	if secret.Type != corev1.SecretTypeServiceAccountToken || endpoint.Authorization.Credentials.Key != corev1.ServiceAccountTokenKey {
		t.Errorf("Secret %s is of type %s, key %q: want %s, key token", secret.Name, secret.Type,
			endpoint.Authorization.Credentials.Key, corev1.SecretTypeServiceAccountToken)
	}
	account := secret.Annotations[corev1.ServiceAccountNameKey]
	if _, ok := in["ServiceAccount/"+account].(*corev1.ServiceAccount); !ok {
		t.Fatalf("the token's ServiceAccount %q is not rendered", account)
	}
	reader, ok := in["ClusterRole/openbao-operator-metrics-reader"].(*rbacv1.ClusterRole)
	if !ok || len(reader.Rules) != 1 || !reflect.DeepEqual(reader.Rules[0].NonResourceURLs, []string{"/metrics"}) ||
		!reflect.DeepEqual(reader.Rules[0].Verbs, []string{"get"}) {
		t.Fatalf("the metrics reader is %+v", reader)
	}
	if !boundTo(in, account, reader.Name) {
		t.Errorf("no ClusterRoleBinding gives ServiceAccount %s/%s the ClusterRole %s", namespace, account, reader.Name)
	}
}

// TestTheChartRendersNoScraperWhenItIsNotNeeded: plain-HTTP metrics need
// no token, and an endpoint with its own authorization keeps it.
func TestTheChartRendersNoScraperWhenItIsNotNeeded(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"metrics over plain HTTP": {"metrics": map[string]any{"secure": false}, "serviceMonitor": map[string]any{"enabled": true}},
		"an endpoint with its own token": {"serviceMonitor": map[string]any{"enabled": true,
			"endpoint": map[string]any{"authorization": map[string]any{"credentials": map[string]any{"name": "prometheus", "key": "token"}}}}},
		"no ServiceMonitor": nil,
	} {
		for key := range render(t, values) {
			if strings.Contains(key, "metrics-scraper") {
				t.Errorf("%s: renders %s", name, key)
			}
		}
	}
	err := renderErr(map[string]any{"serviceMonitor": map[string]any{"enabled": true}, "metrics": map[string]any{"service": map[string]any{"enabled": false}}})
	if err == nil || !strings.Contains(err.Error(), "metrics.service.enabled") {
		t.Errorf("a ServiceMonitor without the Service it selects: %v", err)
	}
}

func boundTo(in installed, account, role string) bool {
	for _, obj := range in {
		b, ok := obj.(*rbacv1.ClusterRoleBinding)
		if !ok || b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != role {
			continue
		}
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == account && s.Namespace == namespace {
				return true
			}
		}
	}
	return false
}

func remarshal(t *testing.T, from, to any) {
	t.Helper()
	raw, err := yaml.Marshal(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, to); err != nil {
		t.Fatal(err)
	}
}

// TestTheNotesSayHowToCheckTheOperatorAndStartACluster renders NOTES.txt
// as helm prints it after an install: how to check the operator is up, a
// first cluster that decodes strictly as an OpenBaoCluster of this API, in
// a namespace the operator watches, and the install guide, which exists.
func TestTheNotesSayHowToCheckTheOperatorAndStartACluster(t *testing.T) {
	cases := map[string]struct {
		values    map[string]any
		clusterNS string
	}{
		"every namespace":    {nil, "bao"},
		"watched namespaces": {map[string]any{"watchNamespaces": []any{"team-a", "team-b"}}, "team-a"},
		"tenancy":            {map[string]any{"tenancy": map[string]any{"enabled": true}}, "bao"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			notes := renderNotes(t, tc.values, "vault-ops")
			for _, want := range []string{
				"kubectl -n vault-ops rollout status deployment/openbao-operator-controller-manager",
				"kubectl apply -n " + tc.clusterNS + " -f -",
				"kubectl wait -n " + tc.clusterNS + " openbaocluster/bao --for=condition=Ready",
				"https://github.com/openbao/operator/blob/main/docs/install.md",
			} {
				if !strings.Contains(notes, want) {
					t.Errorf("the notes lack %q:\n%s", want, notes)
				}
			}
			var cluster v1alpha1.OpenBaoCluster
			if err := yaml.UnmarshalStrict([]byte(between(t, notes, "<<'YAML'\n", "  YAML\n")), &cluster); err != nil {
				t.Fatalf("the notes' cluster is no OpenBaoCluster: %v", err)
			}
			if cluster.Kind != "OpenBaoCluster" || cluster.APIVersion != v1alpha1.GroupVersion.String() || cluster.Spec.Replicas != 3 {
				t.Errorf("the notes' cluster is %+v", cluster)
			}
		})
	}
	if _, err := os.Stat("../docs/install.md"); err != nil {
		t.Errorf("the notes link docs/install.md: %v", err)
	}
}

func renderNotes(t *testing.T, values map[string]any, ns string) string {
	t.Helper()
	files := renderFiles(t, values, ns)
	notes, ok := files["openbao-operator/templates/NOTES.txt"]
	if !ok {
		t.Fatal("the chart has no templates/NOTES.txt")
	}
	return notes
}

// between returns the text between two markers, each line's two-space
// indent removed.
func between(t *testing.T, s, from, to string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, from)
	body, _, ok2 := strings.Cut(rest, to)
	if !ok || !ok2 {
		t.Fatalf("no %q ... %q in:\n%s", from, to, s)
	}
	var out strings.Builder
	for _, line := range strings.Split(body, "\n") {
		out.WriteString(strings.TrimPrefix(line, "  ") + "\n")
	}
	return out.String()
}
