package stepdown

import (
	"testing"

	"github.com/openbao/operator/api/v1alpha1"
)

func TestDecide(t *testing.T) {
	ready := func(mutate func(*v1alpha1.OpenBaoClusterStatus)) *v1alpha1.OpenBaoClusterStatus {
		s := &v1alpha1.OpenBaoClusterStatus{Initialized: true, IdentityConfigured: true, ActiveLeader: "bao-0"}
		if mutate != nil {
			mutate(s)
		}
		return s
	}
	for _, tc := range []struct {
		name    string
		request string
		status  *v1alpha1.OpenBaoClusterStatus
		reach   bool
		want    Action
	}{
		{"no request: nothing", "", ready(nil), true, None},
		{"a new request on a settled cluster: step down", "t1", ready(nil), true, StepDown},
		{"a request already handled: nothing", "t1", ready(func(s *v1alpha1.OpenBaoClusterStatus) {
			s.StepDown = &v1alpha1.StepDownStatus{Request: "t1"}
		}), true, None},
		{"a newer request than the one handled: step down", "t2", ready(func(s *v1alpha1.OpenBaoClusterStatus) {
			s.StepDown = &v1alpha1.StepDownStatus{Request: "t1"}
		}), true, StepDown},
		{"during a rollout: wait", "t1", ready(func(s *v1alpha1.OpenBaoClusterStatus) { s.Upgrade = &v1alpha1.UpgradeStatus{} }), true, Wait},
		{"before initialization: wait", "t1", ready(func(s *v1alpha1.OpenBaoClusterStatus) { s.Initialized = false }), true, Wait},
		{"without a token to step down with: wait", "t1", ready(nil), false, Wait},
		{"no active server: recorded, nobody asked", "t1", ready(func(s *v1alpha1.OpenBaoClusterStatus) { s.ActiveLeader = "" }), true, NoActiveServer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(tc.request, tc.status, tc.reach); got != tc.want {
				t.Fatalf("Decide = %v, want %v", got, tc.want)
			}
		})
	}
}
