package olm_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

const (
	hidden          = ui + "hidden"
	fieldDependency = ui + "fieldDependency:"
)

// schemaAt follows a descriptor's dotted path through the CRD's OpenAPI
// schema, from spec or status.
func schemaAt(root apiextensionsv1.JSONSchemaProps, path string) (apiextensionsv1.JSONSchemaProps, bool) {
	node := root
	for _, name := range strings.Split(path, ".") {
		sub, ok := node.Properties[name]
		if !ok {
			return apiextensionsv1.JSONSchemaProps{}, false
		}
		node = sub
	}
	return node, true
}

// descriptorText is a descriptor's words as the console shows them.
type descriptorText struct{ kind, path, displayName, description string }

func everyDescriptor(t *testing.T) []descriptorText {
	t.Helper()
	var out []descriptorText
	for _, owned := range loadBundle(t).CSV.Spec.CustomResourceDefinitions.Owned {
		for _, d := range owned.SpecDescriptors {
			out = append(out, descriptorText{owned.Kind, "spec." + d.Path, d.DisplayName, d.Description})
		}
		for _, d := range owned.StatusDescriptors {
			out = append(out, descriptorText{owned.Kind, "status." + d.Path, d.DisplayName, d.Description})
		}
	}
	return out
}

// cutShort says a description was cut rather than finished: it does not
// end in a sentence's final mark (. ! ?), optionally followed by closing
// brackets or quotes. A text cut at a length limit ends inside a word or
// after a comma, never on a full stop; every description here is one or
// more whole sentences.
func cutShort(text string) bool {
	text = strings.TrimRight(strings.TrimSpace(text), `)"'`+"`")
	return text == "" || !strings.ContainsAny(text[len(text)-1:], ".!?")
}

// initialisms are written in capitals wherever a display name uses them;
// a name generated from a Go identifier reads "Jwt", "Tls", "Sha256".
var initialisms = []string{"ACME", "API", "CA", "HCL", "ID", "JWT", "KMS", "OIDC", "PEM", "PGP", "SAN", "SANs", "SHA", "TLS", "URL"}

// badInitialism returns the first word of a display name that is an
// initialism (or one followed by digits, as Sha256) in the wrong case.
func badInitialism(name string) string {
	for _, word := range strings.FieldsFunc(name, func(r rune) bool { return r == ' ' || r == '-' }) {
		stem := strings.TrimRightFunc(word, unicode.IsDigit)
		for _, i := range initialisms {
			if strings.EqualFold(stem, i) && stem != i {
				return word
			}
		}
	}
	return ""
}

func TestCutShortSpotsTruncatedText(t *testing.T) {
	for text, cut := range map[string]bool{
		"Size of the snapshot in bytes.":                                        false,
		"Latest restores the newest snapshot (see status).":                     false,
		`Key is "token".`:                                                       false,
		"Restores a snapshot through an OpenBaoRestore named <cluster>-from-ba": true,
		"Retention deletes older snapshots,":                                    true,
		"":                                                                      true,
	} {
		if got := cutShort(text); got != cut {
			t.Errorf("cutShort(%q) = %v, want %v", text, got, cut)
		}
	}
	for path, opens := range map[[2]string]bool{
		{"backup.historyLimit", "HistoryLimit is how many backups are kept."}:    true,
		{"backup.target.caSecretRef.name", "CASecretRef names a Secret."}:        true,
		{"configuration.listener.tlsMinVersion", "TLSMinVersion is the lowest."}: true,
		{"storage.size", "Size of each server's data volume."}:                   false,
		{"backup.historyLimit", "How many backups are kept."}:                    false,
	} {
		if got := opensWithGoName(path[0], path[1]); got != opens {
			t.Errorf("opensWithGoName(%q, %q) = %v, want %v", path[0], path[1], got, opens)
		}
	}
	for name, bad := range map[string]string{"Jwt Auth Role": "Jwt", "Tls": "Tls", "Sha256": "Sha256", "JWT Auth Role": "", "Expected SHA-256": "", "Canary": ""} {
		if got := badInitialism(name); got != bad {
			t.Errorf("badInitialism(%q) = %q, want %q", name, got, bad)
		}
	}
}

// opensWithGoName says a description starts with its field's Go name
// when that name joins words (HistoryLimit, CASecretRef, TLSMinVersion):
// it reads as code. A one-word name (Size, Region) reads as English.
func opensWithGoName(path, description string) bool {
	segments := strings.Split(path, ".")
	field := segments[len(segments)-1]
	if field == "name" && len(segments) > 1 {
		field = segments[len(segments)-2]
	}
	first, _, _ := strings.Cut(description, " ")
	first = strings.TrimRight(first, ":,;")
	if !strings.EqualFold(first, field) {
		return false
	}
	for i := 1; i < len(first); i++ {
		if unicode.IsUpper(rune(first[i])) && (unicode.IsLower(rune(first[i-1])) || i+1 < len(first) && unicode.IsLower(rune(first[i+1]))) {
			return true
		}
	}
	return false
}

// TestDescriptorsAreWrittenForPeople: no description cut mid-word or
// mid-sentence or opening with its Go field name, no display name with a
// Go identifier's casing.
func TestDescriptorsAreWrittenForPeople(t *testing.T) {
	for _, d := range everyDescriptor(t) {
		if cutShort(d.description) {
			t.Errorf("%s %s: the description is cut short: %q", d.kind, d.path, d.description)
		}
		if opensWithGoName(d.path, d.description) {
			t.Errorf("%s %s: the description opens with the Go field name: %q", d.kind, d.path, d.description)
		}
		if word := badInitialism(d.displayName); word != "" {
			t.Errorf("%s %s: the display name %q writes an initialism as %q", d.kind, d.path, d.displayName, word)
		}
		if d.displayName == "" || strings.ContainsAny(d.displayName[len(d.displayName)-1:], ".,:;") {
			t.Errorf("%s %s: the display name %q is empty or ends in punctuation", d.kind, d.path, d.displayName)
		}
	}
}

// TestDescriptorsNameSchemaFields: every spec and status descriptor names
// a field of the CRD's schema, and every fieldDependency names a sibling
// field (the console resolves dependencies between siblings only,
// openshift/console#8120) and a value that field can take.
func TestDescriptorsNameSchemaFields(t *testing.T) {
	b := loadBundle(t)
	for _, owned := range b.CSV.Spec.CustomResourceDefinitions.Owned {
		schema := ownedSchema(t, b.V1CRDs, owned)
		spec, status := schema.Properties["spec"], schema.Properties["status"]
		for _, d := range owned.StatusDescriptors {
			if _, ok := schemaAt(status, d.Path); !ok {
				t.Errorf("%s: status descriptor %s names no field of the CRD", owned.Kind, d.Path)
			}
		}
		for _, d := range owned.SpecDescriptors {
			if _, ok := schemaAt(spec, d.Path); !ok {
				t.Errorf("%s: spec descriptor %s names no field of the CRD", owned.Kind, d.Path)
			}
			for _, x := range d.XDescriptors {
				if rest, ok := strings.CutPrefix(x, fieldDependency); ok {
					checkDependency(t, owned.Kind, spec, d.Path, rest)
				}
			}
		}
	}
}

func checkDependency(t *testing.T, kind string, spec apiextensionsv1.JSONSchemaProps, path, dependency string) {
	t.Helper()
	control, value, ok := strings.Cut(dependency, ":")
	if !ok || value == "" {
		t.Errorf("%s %s: fieldDependency %q is not <path>:<value>", kind, path, dependency)
		return
	}
	field, ok := schemaAt(spec, control)
	if !ok {
		t.Errorf("%s %s: fieldDependency names %s, no field of the CRD", kind, path, control)
		return
	}
	parent := func(p string) string { return p[:max(strings.LastIndex(p, "."), 0)] }
	if parent(control) != parent(path) || control == path {
		t.Errorf("%s %s: fieldDependency names %s, not a sibling field", kind, path, control)
	}
	var allowed []string
	switch {
	case field.Type == "boolean":
		allowed = []string{"true", "false"}
	case len(field.Enum) > 0:
		for _, v := range field.Enum {
			allowed = append(allowed, strings.Trim(string(v.Raw), `"`))
		}
	default:
		t.Errorf("%s %s: fieldDependency on %s, which is neither a switch nor a select", kind, path, control)
		return
	}
	if !slices.Contains(allowed, value) {
		t.Errorf("%s %s: fieldDependency on %s=%s, a value it cannot take (%v)", kind, path, control, value, allowed)
	}
}

// consoleControls are the descriptors the console form needs beyond one
// control per field: what the operator sets or a command writes stays out
// of the form (hidden), mode-specific fields appear with their mode, and
// the pod fields get the console's own widgets.
var consoleControls = []struct {
	kind, path, x string
}{
	{"OpenBaoCluster", "stepDownRequest", hidden},
	{"OpenBaoCluster", "upgrade.resumeRequest", hidden},
	{"OpenBaoRestore", "source.bootstrap", hidden},
	{"OpenBaoCluster", "tls.acme", fieldDependency + "tls.mode:ACME"},
	{"OpenBaoCluster", "selfInit.requests", fieldDependency + "selfInit.enabled:true"},
	{"OpenBaoCluster", "backup.verify.timeout", fieldDependency + "backup.verify.enabled:true"},
	{"OpenBaoCluster", "ingress.host", fieldDependency + "ingress.enabled:true"},
	{"OpenBaoCluster", "gateway.parentRefs", fieldDependency + "gateway.enabled:true"},
	{"OpenBaoCluster", "imageVerification.failurePolicy", fieldDependency + "imageVerification.enabled:true"},
	{"OpenBaoCluster", "networkPolicy.apiClients", fieldDependency + "networkPolicy.enabled:true"},
	{"OpenBaoCluster", "bootstrap.fromBackup.key", fieldDependency + "bootstrap.fromBackup.latest:false"},
	{"OpenBaoRestore", "source.key", fieldDependency + "source.latest:false"},
	{"OpenBaoCluster", "resources", ui + "resourceRequirements"},
	{"OpenBaoCluster", "affinity.nodeAffinity", ui + "nodeAffinity"},
	{"OpenBaoCluster", "affinity.podAffinity", ui + "podAffinity"},
	{"OpenBaoCluster", "affinity.podAntiAffinity", ui + "podAntiAffinity"},
}

func TestTheConsoleFormShowsFieldsWhenTheyApply(t *testing.T) {
	b := loadBundle(t)
	for _, want := range consoleControls {
		i := slices.IndexFunc(b.CSV.Spec.CustomResourceDefinitions.Owned, func(o v1alpha1.CRDDescription) bool { return o.Kind == want.kind })
		if i < 0 {
			t.Fatalf("the CSV owns no %s", want.kind)
		}
		descriptors := b.CSV.Spec.CustomResourceDefinitions.Owned[i].SpecDescriptors
		if !slices.ContainsFunc(descriptors, func(d v1alpha1.SpecDescriptor) bool {
			return d.Path == want.path && slices.Contains(d.XDescriptors, want.x)
		}) {
			t.Errorf("%s spec.%s lacks %s", want.kind, want.path, want.x)
		}
	}
}

// TestTheConsoleShowsHealthAtAGlance: the status a user checks first has
// descriptors of its own.
func TestTheConsoleShowsHealthAtAGlance(t *testing.T) {
	b := loadBundle(t)
	i := slices.IndexFunc(b.CSV.Spec.CustomResourceDefinitions.Owned, func(o v1alpha1.CRDDescription) bool { return o.Kind == "OpenBaoCluster" })
	status := b.CSV.Spec.CustomResourceDefinitions.Owned[i].StatusDescriptors
	for _, path := range []string{"raft.failureTolerance", "backup.lastBackupTime", "backup.nextScheduledBackup", "upgrade.targetVersion"} {
		if !slices.ContainsFunc(status, func(d v1alpha1.StatusDescriptor) bool { return d.Path == path }) {
			t.Errorf("OpenBaoCluster status.%s has no status descriptor", path)
		}
	}
}

// TestTheSuggestedNamespaceIsRestricted: the console offers to create this
// namespace when the user installs the operator; it is config/manager's,
// with the restricted Pod Security labels the operator's pods are built
// for.
func TestTheSuggestedNamespaceIsRestricted(t *testing.T) {
	b := loadBundle(t)
	var ns, want corev1.Namespace
	if err := json.Unmarshal([]byte(b.CSV.Annotations["operatorframework.io/suggested-namespace-template"]), &ns); err != nil {
		t.Fatalf("operatorframework.io/suggested-namespace-template: %v", err)
	}
	readYAML(t, "../config/manager/namespace.yaml", &want)
	if ns.Kind != "Namespace" || ns.Name != want.Name {
		t.Errorf("the suggested namespace template is not the Namespace %s: %+v", want.Name, ns)
	}
	for k, v := range want.Labels {
		if strings.HasPrefix(k, "pod-security.kubernetes.io/") && ns.Labels[k] != v {
			t.Errorf("the suggested namespace's %s is %q, config/manager's %q", k, ns.Labels[k], v)
		}
	}
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("the suggested namespace does not enforce the restricted Pod Security standard: %v", ns.Labels)
	}
}

// TestTheExamplesWorkTogether: each backup and restore example names a
// cluster example whose spec.backup lets the webhook admit it (the
// envtest tier applies them to a real API server with the webhook).
func TestTheExamplesWorkTogether(t *testing.T) {
	var examples []struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			ClusterName string          `json:"clusterName"`
			Backup      json.RawMessage `json:"backup"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(loadBundle(t).CSV.Annotations["alm-examples"]), &examples); err != nil {
		t.Fatal(err)
	}
	backedUp := map[string]bool{}
	for _, e := range examples {
		if e.Kind == "OpenBaoCluster" {
			backedUp[e.Metadata.Name] = len(e.Spec.Backup) > 0
		}
	}
	for _, e := range examples {
		if e.Kind != "OpenBaoBackup" && e.Kind != "OpenBaoRestore" {
			continue
		}
		has, ok := backedUp[e.Spec.ClusterName]
		switch {
		case !ok:
			t.Errorf("the %s example %s names cluster %q, which no OpenBaoCluster example defines", e.Kind, e.Metadata.Name, e.Spec.ClusterName)
		case !has:
			t.Errorf("the %s example %s names cluster %q, whose example has no spec.backup", e.Kind, e.Metadata.Name, e.Spec.ClusterName)
		}
	}
}

// TestTheBundleInstallsWithoutOptionalAPIs: OLM v0 accepts
// ConsoleYAMLSample and PrometheusRule as bundle objects, but creates them
// through API discovery and fails the whole InstallPlan when their API is
// not served (catalog operator ExecutePlan -> apiresourceFromGVK:
// GroupVersionKindNotFoundError), so on Kubernetes without the OpenShift
// console or the Prometheus Operator the operator would not install. The
// console's samples are the alm-examples; the rules ship with the chart.
func TestTheBundleInstallsWithoutOptionalAPIs(t *testing.T) {
	for _, o := range loadBundle(t).Objects {
		switch group := o.GroupVersionKind().Group; group {
		case "console.openshift.io", "monitoring.coreos.com":
			t.Errorf("the bundle ships %s %s of the optional API %s: OLM fails the install where it is not served", o.GetKind(), o.GetName(), group)
		}
	}
}
