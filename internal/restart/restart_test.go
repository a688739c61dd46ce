package restart

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
)

func TestDecide(t *testing.T) {
	done := metav1.Now()
	rolling := &v1alpha1.UpgradeStatus{TargetVersion: "2.4.0"}
	recorded := func(request string, generation int64, completed *metav1.Time) *v1alpha1.RestartStatus {
		return &v1alpha1.RestartStatus{Request: request, Generation: generation, CompletedTime: completed}
	}
	for name, tc := range map[string]struct {
		request string
		status  v1alpha1.OpenBaoClusterStatus
		want    Action
	}{
		"no request does nothing":                                {"", v1alpha1.OpenBaoClusterStatus{SettledGeneration: 4}, None},
		"a first request is recorded":                            {"t1", v1alpha1.OpenBaoClusterStatus{SettledGeneration: 4}, Record},
		"a new request is recorded over a completed one":         {"t2", v1alpha1.OpenBaoClusterStatus{Restart: recorded("t1", 3, &done), SettledGeneration: 4}, Record},
		"a new request is recorded over one still rolling":       {"t2", v1alpha1.OpenBaoClusterStatus{Restart: recorded("t1", 5, nil), Upgrade: rolling, SettledGeneration: 4}, Record},
		"the same request again does nothing once complete":      {"t1", v1alpha1.OpenBaoClusterStatus{Restart: recorded("t1", 3, &done), SettledGeneration: 4}, None},
		"a recorded request waits while a rollout runs":          {"t1", v1alpha1.OpenBaoClusterStatus{Restart: recorded("t1", 5, nil), Upgrade: rolling, SettledGeneration: 5}, None},
		"a recorded request waits until its template settles":    {"t1", v1alpha1.OpenBaoClusterStatus{Restart: recorded("t1", 5, nil), SettledGeneration: 4}, None},
		"a recorded request completes once its template settled": {"t1", v1alpha1.OpenBaoClusterStatus{Restart: recorded("t1", 5, nil), SettledGeneration: 5}, Complete},
		"a later settled generation completes it too":            {"t1", v1alpha1.OpenBaoClusterStatus{Restart: recorded("t1", 5, nil), SettledGeneration: 7}, Complete},
		"clearing the field after completion does nothing":       {"", v1alpha1.OpenBaoClusterStatus{Restart: recorded("t1", 5, &done), SettledGeneration: 7}, None},
		"clearing the field mid-rollout still completes it":      {"", v1alpha1.OpenBaoClusterStatus{Restart: recorded("t1", 5, nil), SettledGeneration: 5}, Complete},
	} {
		t.Run(name, func(t *testing.T) {
			status := tc.status
			if got := Decide(tc.request, &status); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
