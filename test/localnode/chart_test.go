package localnode

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestImageValuesSplitTheReferenceAtTheTag(t *testing.T) {
	const wrapperRef = "localhost/bao-wrapper:1.1.1-0123456789abcdef"
	for ref, want := range map[string][2]string{
		"localhost/openbao-operator:de7d1d1d8255db90": {"localhost/openbao-operator", "de7d1d1d8255db90"},
		"registry:5000/team/operator:1.2.3":           {"registry:5000/team/operator", "1.2.3"},
	} {
		vals, err := ImageValues(ref, wrapperRef)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		image := vals["image"].(map[string]any)
		if got := [2]string{image["repository"].(string), image["tag"].(string)}; got != want {
			t.Errorf("ImageValues(%q) = %v, want %v", ref, got, want)
		}
		wrapper := vals["wrapper"].(map[string]any)["image"].(map[string]any)
		if got := wrapper["repository"].(string) + ":" + wrapper["tag"].(string); got != wrapperRef {
			t.Errorf("ImageValues(_, %q) names the wrapper %s", wrapperRef, got)
		}
	}
	for _, ref := range []string{"registry:5000/operator", "operator:", "operator"} {
		if _, err := ImageValues(ref, wrapperRef); err == nil {
			t.Errorf("ImageValues(%q) succeeded, want an error: it has no tag", ref)
		}
		if _, err := ImageValues("localhost/openbao-operator:1", ref); err == nil {
			t.Errorf("ImageValues(_, %q) succeeded, want an error: it has no tag", ref)
		}
	}
}

// The values the harness installs with put the manager, and only it, on
// the freshly built image, and hand it the freshly built wrapper image:
// rendered by helm as `helm template` does.
func TestTheChartRunsTheManagerOnTheImageOfTheValues(t *testing.T) {
	chrt, err := loader.LoadDir(filepath.Join("..", "..", OperatorChartDir))
	if err != nil {
		t.Fatal(err)
	}
	const image, wrapperImage = "localhost/openbao-operator:0123456789abcdef", "localhost/bao-wrapper:1.1.1-0123456789abcdef"
	vals, err := ImageValues(image, wrapperImage)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = OperatorRelease, OperatorNamespace
	if install.KubeVersion, err = chartutil.ParseKubeVersion(KubernetesVersion); err != nil {
		t.Fatal(err)
	}
	rel, err := install.Run(chrt, vals)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := DecodeManifests([]byte(rel.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	var images []string
	for _, u := range objs {
		if u.GetKind() != "Deployment" {
			continue
		}
		if u.GetName() != OperatorDeployment || u.GetNamespace() != OperatorNamespace {
			t.Errorf("the chart renders Deployment %s/%s, want %s/%s", u.GetNamespace(), u.GetName(), OperatorNamespace, OperatorDeployment)
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
			t.Fatal(err)
		}
		for _, c := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
			images = append(images, c.Name+"="+c.Image)
			for _, e := range c.Env {
				if e.Name == "WRAPPER_IMAGE" {
					images = append(images, c.Name+" WRAPPER_IMAGE="+e.Value)
				}
			}
		}
	}
	if want := []string{ManagerContainer + "=" + image, ManagerContainer + " WRAPPER_IMAGE=" + wrapperImage}; !reflect.DeepEqual(images, want) {
		t.Errorf("rendered containers %v, want %v", images, want)
	}
}

func TestContainerProblemsNameTheReasonAndTheExits(t *testing.T) {
	got := containerProblems([]corev1.ContainerStatus{{
		Name:                 "manager",
		RestartCount:         3,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}},
	}, {Name: "ready", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}})
	for _, want := range []string{"manager waiting: CrashLoopBackOff back-off 40s", "manager exited 1 (Error) 3 times"} {
		if !strings.Contains(got, want) {
			t.Errorf("containerProblems = %q, want it to contain %q", got, want)
		}
	}
	if strings.Contains(got, "ready") {
		t.Errorf("containerProblems = %q names a running container", got)
	}
}

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
