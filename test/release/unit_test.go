package release_test

import (
	"slices"
	"strings"
	"testing"
)

// These need no node: they check the tier's own judgements.

func TestAnSBOMLacksAModuleNotListedAtItsVersion(t *testing.T) {
	cyclonedx := `{"bomFormat":"CycloneDX","metadata":{"component":{"name":"github.com/openbao/operator","version":"v0.1.0",
	  "components":[{"name":"github.com/a/b","version":"v1.0.0"}]}},
	  "components":[{"name":"ignored","version":"x","purl":"pkg:golang/sigs.k8s.io/controller-runtime@v0.25.2?type=module"},
	                {"name":"golang.org/x/net","version":"v0.40.0"}]}`
	spdx := `{"spdxVersion":"SPDX-2.3","packages":[{"name":"sigs.k8s.io/controller-runtime","versionInfo":"v0.25.2"}]}`
	cases := []struct {
		name, doc string
		want      []string
		missing   []string
	}{
		{"a CycloneDX SBOM lists modules by purl, by name, nested", cyclonedx,
			[]string{"sigs.k8s.io/controller-runtime@v0.25.2", "golang.org/x/net@v0.40.0", "github.com/a/b@v1.0.0"}, nil},
		{"a CycloneDX SBOM lacks a module at another version", cyclonedx,
			[]string{"sigs.k8s.io/controller-runtime@v0.25.3", "golang.org/x/net@v0.40.0"}, []string{"sigs.k8s.io/controller-runtime@v0.25.3"}},
		{"an SPDX SBOM lists packages by name and version", spdx,
			[]string{"sigs.k8s.io/controller-runtime@v0.25.2", "golang.org/x/net@v0.40.0"}, []string{"golang.org/x/net@v0.40.0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := missingModules([]byte(tc.doc), tc.want)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.missing) {
				t.Errorf("missing %v, want %v", got, tc.missing)
			}
		})
	}
	if _, err := missingModules([]byte(`{"bomFormat":"CycloneDX"}`), []string{"x@v1"}); err == nil {
		t.Error("an SBOM that lists nothing was accepted")
	}
}

func TestAnUpgradeThatTouchesAServerCountsAsARestart(t *testing.T) {
	before := serverState{generation: 2, updateRev: "r1", currentRev: "r1", statefulSet: "ns/bao", pods: map[string]podState{
		"bao-0": {uid: "u0"}, "bao-1": {uid: "u1", restarts: 1}, "bao-2": {uid: "u2"}}}
	same := func(mut func(*serverState)) serverState {
		s := before
		s.pods = map[string]podState{}
		for k, v := range before.pods {
			s.pods[k] = v
		}
		mut(&s)
		return s
	}
	cases := []struct {
		name  string
		after serverState
		want  string
	}{
		{"nothing changed", same(func(*serverState) {}), ""},
		{"a pod replaced", same(func(s *serverState) { s.pods["bao-1"] = podState{uid: "u9", restarts: 1} }), "bao-1 was replaced"},
		{"a pod gone", same(func(s *serverState) { delete(s.pods, "bao-2") }), "bao-2 is gone"},
		{"a container restarted", same(func(s *serverState) { s.pods["bao-0"] = podState{uid: "u0", restarts: 1} }), "bao-0 restarted 1 times"},
		{"a new pod template", same(func(s *serverState) { s.generation = 3 }), "generation 2 -> 3"},
		{"a new revision", same(func(s *serverState) { s.updateRev = "r2" }), "update r1 -> r2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(countRestarts(before, tc.after), "; ")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("restarts %q, want %q", got, tc.want)
			}
		})
	}
}
