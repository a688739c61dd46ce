
import (
	"testing"
	"time"
)

func TestPodSteadyWantsEveryContainerReadyAndRunningLongEnough(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	running := func(ago time.Duration, ready bool) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: "manager", Ready: ready, State: corev1.ContainerState{
			Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-ago))}}}
	}
	crashed := corev1.ContainerStatus{Name: "manager", State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}
	for name, tc := range map[string]struct {
		statuses []corev1.ContainerStatus
		want     bool
	}{
		"ready and up for 6s":              {[]corev1.ContainerStatus{running(6*time.Second, true)}, true},
		"ready but up for 1s only":         {[]corev1.ContainerStatus{running(time.Second, true)}, false},
		"up for a minute but not ready":    {[]corev1.ContainerStatus{running(time.Minute, false)}, false},
		"waiting in CrashLoopBackOff":      {[]corev1.ContainerStatus{crashed}, false},
		"one steady container, one not":    {[]corev1.ContainerStatus{running(time.Minute, true), crashed}, false},
		"no container status reported yet": {nil, false},
	} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Status: corev1.PodStatus{ContainerStatuses: tc.statuses}}
		if got, why := podSteady(p, now, 5*time.Second); got != tc.want {
			t.Errorf("%s: podSteady = %v (%s), want %v", name, got, why, tc.want)
		}
	}
}
