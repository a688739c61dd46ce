package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/openbao/operator/api/v1alpha1"
)

func labelledPod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// logsFixture is a cluster prod/bao with two servers, another cluster's
// server, and one operator pod, and what each log holds.
func logsFixture() (*Commands, *kubefake.Clientset, map[string]string) {
	cluster := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "bao"}}
	other := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "other"}}
	kube := kubefake.NewClientset(
		labelledPod("prod", "bao-1", cluster.PodSelectorLabels()),
		labelledPod("prod", "bao-0", cluster.PodSelectorLabels()),
		labelledPod("prod", "other-0", other.PodSelectorLabels()),
		labelledPod("openbao-operator-system", "openbao-operator-abc", OperatorSelector),
	)
	logs := map[string]string{
		"prod/bao-0":   "core: vault is unsealed\nraft: entering leader state\n",
		"prod/bao-1":   "core: standby\n",
		"prod/other-0": "other cluster's server\n",
		"openbao-operator-system/openbao-operator-abc": strings.Join([]string{
			`{"level":"info","msg":"reconciled","controller":"openbaocluster","namespace":"prod","name":"bao","reconcile_id":"1"}`,
			`{"level":"info","msg":"other cluster","controller":"openbaocluster","namespace":"prod","name":"other"}`,
			`{"level":"info","msg":"same name, other namespace","namespace":"team","name":"bao"}`,
			`{"level":"info","msg":"no name key","namespace":"prod"}`,
			`{"level":"info","msg":"a name that starts like it","namespace":"prod","name":"bao-2"}`,
			`I0101 plain klog line about prod/bao`,
			`{"audit":true,"event_type":"openbao.raft.step_down","namespace":"prod","name":"bao","pod":"bao-0"}`,
		}, "\n") + "\n",
	}
	cmds := &Commands{Client: fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(cluster, other).Build(),
		Kube: kube, Namespace: "prod", Now: time.Now,
		PodLogs: func(_ context.Context, ns, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
			text, ok := logs[ns+"/"+pod]
			if !ok {
				return nil, fmt.Errorf("no log of %s/%s", ns, pod)
			}
			return io.NopCloser(strings.NewReader(text)), nil
		}}
	return cmds, kube, logs
}

// TestLogsKeepOnlyTheOperatorsLinesAboutTheCluster: every server's lines,
// prefixed by its pod, and of the operator's only the JSON lines whose
// namespace and name are the cluster's; nothing of another cluster.
func TestLogsKeepOnlyTheOperatorsLinesAboutTheCluster(t *testing.T) {
	cmds, _, _ := logsFixture()
	var out, notes bytes.Buffer
	err := cmds.Logs(context.Background(), "bao", LogsOptions{Tail: -1, Operator: true, OperatorNamespace: "openbao-operator-system"}, &out, &notes)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"[bao-0] core: vault is unsealed",
		"[bao-0] raft: entering leader state",
		"[bao-1] core: standby",
		`[operator/openbao-operator-abc] {"level":"info","msg":"reconciled","controller":"openbaocluster","namespace":"prod","name":"bao","reconcile_id":"1"}`,
		`[operator/openbao-operator-abc] {"audit":true,"event_type":"openbao.raft.step_down","namespace":"prod","name":"bao","pod":"bao-0"}`,
	}, "\n") + "\n"
	if out.String() != want {
		t.Errorf("logs printed:\n%s\nwant:\n%s", out.String(), want)
	}
	if notes.Len() != 0 {
		t.Errorf("notes: %q", notes.String())
	}
}

// TestLogsTailCountsTheClustersOperatorLines: --tail 1 keeps the newest
// operator line about the cluster, not the newest operator line.
func TestLogsTailCountsTheClustersOperatorLines(t *testing.T) {
	cmds, _, _ := logsFixture()
	var asked []*corev1.PodLogOptions
	open := cmds.PodLogs
	cmds.PodLogs = func(ctx context.Context, ns, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
		asked = append(asked, opts)
		return open(ctx, ns, pod, opts)
	}
	var out, notes bytes.Buffer
	o := LogsOptions{Tail: 1, Since: 90 * time.Second, Operator: true, OperatorNamespace: "openbao-operator-system"}
	if err := cmds.Logs(context.Background(), "bao", o, &out, &notes); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "openbao.raft.step_down") || strings.Count(out.String(), "[operator/") != 1 {
		t.Errorf("operator lines with --tail 1:\n%s", out.String())
	}
	if len(asked) != 3 || *asked[0].TailLines != 1 || asked[0].Container != ServerContainer || *asked[0].SinceSeconds != 90 ||
		asked[2].TailLines != nil || asked[2].Container != OperatorContainer {
		t.Errorf("log options asked: %+v %+v %+v", *asked[0], *asked[1], *asked[2])
	}
}

// TestLogsWithoutRightsToTheOperatorSayWhyInOneLine: a user who may not
// list the operator's pods still gets the servers' logs, and one note.
func TestLogsWithoutRightsToTheOperatorSayWhyInOneLine(t *testing.T) {
	cmds, kube, _ := logsFixture()
	kube.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetNamespace() == "openbao-operator-system" {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no"))
		}
		return false, nil, nil
	})
	var out, notes bytes.Buffer
	err := cmds.Logs(context.Background(), "bao", LogsOptions{Tail: -1, Operator: true, OperatorNamespace: "openbao-operator-system"}, &out, &notes)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "[bao-1] core: standby") || strings.Contains(out.String(), "operator") {
		t.Errorf("output:\n%s", out.String())
	}
	if n := strings.Count(notes.String(), "\n"); n != 1 || !strings.Contains(notes.String(), "may not list pods in namespace openbao-operator-system") {
		t.Errorf("notes (%d lines): %q", n, notes.String())
	}
}

// TestLogsFollowPrintsEveryStreamWholeLines: with --follow all logs are
// read at once; each line still arrives whole and prefixed.
func TestLogsFollowPrintsEveryStreamWholeLines(t *testing.T) {
	cmds, _, _ := logsFixture()
	var out, notes bytes.Buffer
	o := LogsOptions{Tail: 5, Follow: true, Operator: true, OperatorNamespace: "openbao-operator-system"}
	if err := cmds.Logs(context.Background(), "bao", o, &out, &notes); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 {
		t.Errorf("followed lines:\n%s", out.String())
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "[bao-") && !strings.HasPrefix(l, "[operator/openbao-operator-abc] {") {
			t.Errorf("line %q", l)
		}
	}
}

// TestLogsCommandReadsTheOperatorWhereTheFlagSays: the command passes
// --operator-namespace, --since, --tail and -f through.
func TestLogsCommandReadsTheOperatorWhereTheFlagSays(t *testing.T) {
	cmds, kube, _ := logsFixture()
	if err := kube.Tracker().Add(labelledPod("ops", "op-0", OperatorSelector)); err != nil {
		t.Fatal(err)
	}
	var asked []string
	var mu sync.Mutex // -f reads every log at once
	cmds.PodLogs = func(_ context.Context, ns, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, fmt.Sprintf("%s/%s since=%d follow=%v", ns, pod, *opts.SinceSeconds, opts.Follow))
		return io.NopCloser(strings.NewReader("")), nil
	}
	var out, errOut bytes.Buffer
	root := newRoot(&cli{streams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
		kube: genericclioptions.NewConfigFlags(true), isTerminal: func(io.Reader) bool { return false },
		clients: func() (*Commands, error) { return cmds, nil }})
	root.SetArgs([]string{"logs", "bao", "--operator", "--operator-namespace", "ops", "--since", "2m", "-f"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(asked)
	if want := "ops/op-0 since=120 follow=true,prod/bao-0 since=120 follow=true,prod/bao-1 since=120 follow=true"; strings.Join(asked, ",") != want {
		t.Errorf("logs read %v, want %s", asked, want)
	}
}
