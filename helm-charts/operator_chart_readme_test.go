package helmcharts_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openbao/operator/test/testbin"
)

// TestTheChartReadmeIsCurrent renders the chart's README with helm-docs
// (built from its pinned module: make docs-tools) as `make
// chart-readme` does, and fails when README.md differs: a value or comment
// changed without the README.
func TestTheChartReadmeIsCurrent(t *testing.T) {
	helmDocs, err := testbin.Path("helm-docs")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no helm-docs under CI: make test builds it first (%v)", err)
		}
		t.Skipf("SKIP: %v (bash test/tools/build.sh helm-docs)", err)
	}
	// The flags of the Makefile's chart-readme.
	cmd := exec.Command(helmDocs, "--chart-search-root="+operatorChart, "--template-files=README.md.gotmpl",
		"--log-level=warning", "--dry-run")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	want, err := cmd.Output()
	if err != nil || len(want) == 0 {
		t.Fatalf("helm-docs: %v\n%s", err, stderr.String())
	}
	got, err := os.ReadFile(filepath.Join(operatorChart, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s/README.md is not what helm-docs renders from values.yaml: run make chart-readme", operatorChart)
	}
}

// TestTheChartReadmeDescribesEveryValue: every value the schema names,
// down to the maps it leaves free-form, has a row with a description in
// the README (helm-docs takes it from the value's `# --` comment).
func TestTheChartReadmeDescribesEveryValue(t *testing.T) {
	c := loadOperatorChart(t)
	readme, err := os.ReadFile(filepath.Join(operatorChart, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // key: description
	for _, line := range strings.Split(string(readme), "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) >= 4 && strings.HasPrefix(cells[0], "| ") {
			rows[strings.TrimPrefix(cells[0], "| ")] = strings.TrimSuffix(cells[len(cells)-1], " |")
		}
	}
	var schema map[string]any
	if err := json.Unmarshal(c.Schema, &schema); err != nil {
		t.Fatal(err)
	}
	definitions, _ := schema["definitions"].(map[string]any)
	for _, key := range schemaLeaves("", schema, definitions) {
		if !described(rows, key) {
			t.Errorf("the README has no described row for %s (a `# --` comment above it in values.yaml)", key)
		}
	}
}

// described: the key, or a map holding it that is documented as a whole
// (resources), has a row with a description.
func described(rows map[string]string, key string) bool {
	for k := key; k != ""; {
		if desc, ok := rows[k]; ok && strings.TrimSpace(desc) != "" {
			return true
		}
		i := strings.LastIndex(k, ".")
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return false
}

// schemaLeaves lists the dotted paths of the schema's properties that have
// no properties of their own: the values a user sets as a whole.
func schemaLeaves(prefix string, schema, definitions map[string]any) []string {
	if ref, ok := schema["$ref"].(string); ok {
		schema, _ = definitions[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
	}
	props, _ := schema["properties"].(map[string]any)
	if props == nil {
		return []string{strings.TrimSuffix(prefix, ".")}
	}
	var out []string
	for key, sub := range props {
		sub, _ := sub.(map[string]any)
		out = append(out, schemaLeaves(prefix+key+".", sub, definitions)...)
	}
	return out
}
