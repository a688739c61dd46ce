// Command crdgen finishes the OpenBaoCluster CRD that controller-gen wrote:
// go run ./internal/crdgen/cmd/crdgen config/crd/bases/openbao.org_openbaoclusters.yaml
package main

import (
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/crdgen"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdgen CRD_FILE")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "crdgen: %v\n", err)
		os.Exit(1)
	}
}

func run(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := crdgen.Protect(data, crdgen.OpenBaoClusterFields())
	if err != nil {
		return err
	}
	if out, err = crdgen.SetRules(out, []crdgen.Rules{{Path: []string{"spec", "backup", "schedule"}, Rules: scheduleRules()}}); err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// scheduleRules are internal/backup's schedule grammar as CRD rules.
func scheduleRules() apiextensionsv1.ValidationRules {
	var out apiextensionsv1.ValidationRules
	for _, r := range backup.ScheduleRules() {
		out = append(out, apiextensionsv1.ValidationRule{Rule: r.Rule, MessageExpression: r.MessageExpression})
	}
	return out
}
