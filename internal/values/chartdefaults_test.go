package values_test

import (
	"io/fs"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/api/v1alpha1"
	helmcharts "github.com/openbao/operator/helm-charts"
	"github.com/openbao/operator/internal/values"
)

// TestChartDefaultNamesAreTheAPIsNames keeps the chart's default child names
// equal to what the API derives for a cluster named openbao, so the chart
// lints and renders on its own with the same names the operator uses.
func TestChartDefaultNamesAreTheAPIsNames(t *testing.T) {
	data, err := fs.ReadFile(helmcharts.OpenBaoCluster, helmcharts.OpenBaoClusterDir+"/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var defaults map[string]any
	if err := yaml.Unmarshal(data, &defaults); err != nil {
		t.Fatal(err)
	}
	c := &v1alpha1.OpenBaoCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "openbao", Namespace: "default"},
		Spec:       v1alpha1.OpenBaoClusterSpec{Version: "2.4.0", Replicas: 3},
	}
	vals, err := values.Compute(inputOf(c), values.Operator{}, values.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := defaults["cluster"], vals["cluster"]; !reflect.DeepEqual(got, want) {
		t.Fatalf("values.yaml cluster = %v\nthe API derives    %v", got, want)
	}
}
