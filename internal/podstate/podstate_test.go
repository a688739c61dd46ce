package podstate_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/internal/podstate"
)

func TestFromKube(t *testing.T) {
	p := podstate.FromKube(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bao-0", Labels: map[string]string{podstate.LabelInitialized: "true"}},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "other", RestartCount: 9},
				{Name: podstate.ContainerName, RestartCount: 4,
					State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
					LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 2}}},
			},
		},
	})
	if p.Running || p.Ready || p.RestartCount != 4 || p.WaitingReason != "CrashLoopBackOff" || p.LastTerminationReason != "Error" || p.LastExitCode != 2 {
		t.Errorf("%+v", p)
	}
	if v, known := p.LabelState(podstate.LabelInitialized); !v || !known {
		t.Errorf("label state %v %v", v, known)
	}
	if p.Ordinal != 0 {
		t.Errorf("ordinal %d, want 0", p.Ordinal)
	}
}

func server(name string, ready bool, labels map[string]string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if ready {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	return p
}

func TestSnapshotSortsByOrdinalAndFindsTheReadyActiveServer(t *testing.T) {
	s := podstate.NewSnapshot([]corev1.Pod{
		server("bao-10", true, map[string]string{podstate.LabelActive: "false", podstate.LabelVersion: "2.4.0"}),
		server("bao-2", false, map[string]string{podstate.LabelActive: "true", podstate.LabelVersion: "2.4.0"}),
		server("bao-1", true, map[string]string{podstate.LabelActive: "true", podstate.LabelVersion: "2.4.0"}),
	})
	var order []int
	for _, p := range s {
		order = append(order, p.Ordinal)
	}
	if len(order) != 3 || order[0] != 1 || order[1] != 2 || order[2] != 10 {
		t.Errorf("ordinals %v, want [1 2 10]", order)
	}
	if got := s.Leader(); got != "bao-1" {
		t.Errorf("leader %q, want the ready active bao-1 (bao-2 is active but not ready)", got)
	}
	if _, ok := s.Get("bao-2"); !ok {
		t.Error("bao-2 not found")
	}
}

func TestCommonVersionNeedsEveryReplicaReadyOnOneVersion(t *testing.T) {
	v := func(version string) map[string]string { return map[string]string{podstate.LabelVersion: version} }
	tests := map[string]struct {
		pods []corev1.Pod
		want string
	}{
		"three ready on one version": {[]corev1.Pod{server("b-0", true, v("2.4.0")), server("b-1", true, v("2.4.0")), server("b-2", true, v("2.4.0"))}, "2.4.0"},
		"one not ready":              {[]corev1.Pod{server("b-0", true, v("2.4.0")), server("b-1", true, v("2.4.0")), server("b-2", false, v("2.4.0"))}, ""},
		"two versions while rolling": {[]corev1.Pod{server("b-0", true, v("2.4.0")), server("b-1", true, v("2.4.0")), server("b-2", true, v("2.5.0"))}, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := podstate.NewSnapshot(tc.pods).CommonVersion(3); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
