package helmcharts_test

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/openbao/operator/internal/wrapper"
)

// TestTheDefaultWrapperImageIsThisWrappersVersion: both charts default to
// the bao-wrapper image tagged with internal/wrapper.Version, so a wrapper
// change (which bumps Version) reaches the installs, and nothing else does.
// config/manager follows the operator chart
// (TestOperatorChartInstallsWhatConfigDefaultDoes) and the CSV follows
// config/manager (olm.TestTheBundleNamesOneWrapperImage).
func TestTheDefaultWrapperImageIsThisWrappersVersion(t *testing.T) {
	want := "ghcr.io/openbao/bao-wrapper:" + wrapper.Version
	op := loadOperatorChart(t).Values["wrapper"].(map[string]any)["image"].(map[string]any)
	if got := op["repository"].(string) + ":" + op["tag"].(string); got != want || op["digest"] != "" {
		t.Errorf("the operator chart's wrapper.image is %s (digest %q), want %s", got, op["digest"], want)
	}
	cluster, err := loader.LoadDir("openbao-cluster")
	if err != nil {
		t.Fatal(err)
	}
	if got := cluster.Values["wrapper"].(map[string]any)["image"]; got != want {
		t.Errorf("the openbao-cluster chart's wrapper.image is %v, want %s", got, want)
	}
	rendered := string(renderOperatorChart(t, loadOperatorChart(t), nil))
	if !strings.Contains(rendered, "- name: WRAPPER_IMAGE\n          value: "+want+"\n") {
		t.Errorf("the operator chart does not pass WRAPPER_IMAGE=%s to the manager", want)
	}
}
