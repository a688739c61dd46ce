package plugin

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/openbao/operator/api/v1alpha1"
)

func testRoot() (*bytes.Buffer, *bytes.Buffer, func(args ...string) error) {
	var out, errOut bytes.Buffer
	return &out, &errOut, func(args ...string) error {
		root := NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, "v9.9.9")
		root.SetArgs(append([]string{"--kubeconfig", "/nonexistent/kubeconfig"}, args...))
		return root.Execute()
	}
}

// TestFlagsMayFollowTheCommandAndCluster: kubectl users type flags after
// the arguments (`kubectl openbao status bao -n prod`), and kubectl's own
// connection flags are there.
func TestFlagsMayFollowTheCommandAndCluster(t *testing.T) {
	for _, args := range [][]string{
		{"status", "bao", "-n", "prod"},
		{"-n", "prod", "status", "bao"},
		{"status", "-n", "prod", "bao"},
		{"status", "--namespace=prod", "bao", "--context", "other"},
	} {
		root := NewRootCommand(genericiooptions.NewTestIOStreamsDiscard(), "dev")
		cmd, rest, err := root.Find(args)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		ns, _ := cmd.Flags().GetString("namespace")
		if cmd.Name() != "status" || strings.Join(cmd.Flags().Args(), " ") != "bao" || ns != "prod" {
			t.Errorf("%v: command %s, positional %v, namespace %q", args, cmd.Name(), cmd.Flags().Args(), ns)
		}
	}
}

// TestMisusedFlagsAreRefusedBeforeConnecting: what cannot be meant is
// said before any request, naming what to type instead.
func TestMisusedFlagsAreRefusedBeforeConnecting(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"report", "bao", "-o", "r.tgz"}, "name it with --file r.tgz"},
		{[]string{"status", "bao", "-o", "wide"}, `-o "wide": want json or yaml`},
		{[]string{"check", "-o", "table"}, `-o "table": want json or yaml`},
		{[]string{"status", "bao", "-A"}, "-A lists every cluster: give no CLUSTER"},
		{[]string{"resume-upgrade"}, "accepts 1 arg(s), received 0"},
		{[]string{"restore", "bao", "--yes"}, "at least one of the flags in the group [latest backup] is required"},
		{[]string{"restore", "bao", "--latest", "--backup", "b"}, "[backup latest] were all set"},
		{[]string{"logs", "bao", "--since", "soon"}, `invalid argument "soon" for "--since"`},
		{[]string{"bao-env", "bao", "-o", "env"}, `-o "env": want json or yaml`},
	} {
		_, _, run := testRoot()
		if err := run(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

// TestCompletionIsCobras: `kubectl openbao completion bash` prints a
// script completing the plugin's commands.
func TestCompletionIsCobras(t *testing.T) {
	out, _, run := testRoot()
	if err := run("completion", "bash"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "__start_kubectl-openbao") {
		t.Fatalf("no bash completion script:\n%.300s", out.String())
	}
	out.Reset()
	if err := run("__complete", "status", "bao", "-o", ""); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "json\nyaml\n") {
		t.Errorf("-o completes to %q, want json and yaml", out.String())
	}
}

// TestOnlyTheWebhooksOwnRefusalPassesTheCheck: the dry-run probe is
// accepted without a webhook, refused by the schema or RBAC without
// reaching it, or refused by the webhook; only the last is OK.
func TestOnlyTheWebhooksOwnRefusalPassesTheCheck(t *testing.T) {
	gk := schema.GroupKind{Group: "openbao.org", Kind: "OpenBaoCluster"}
	gr := schema.GroupResource{Group: "openbao.org", Resource: "openbaoclusters"}
	byWebhook := apierrors.NewInvalid(gk, "x", field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), "x", "ends in -internal")})
	byWebhook.ErrStatus.Message = `admission webhook "vopenbaocluster.openbao.org" denied the request: metadata.name: Invalid value: "x": ends in -internal`
	for _, tc := range []struct {
		name   string
		err    error
		ok     bool
		phrase string
	}{
		{"accepted: no webhook is registered", nil, false, "no validating webhook"},
		{"refused by the webhook", byWebhook, true, "answers"},
		{"the webhook is down", apierrors.NewInternalError(errors.New(`Internal error occurred: failed calling webhook "vopenbaocluster.openbao.org": connection refused`)), false, "not answering"},
		{"refused by the CRD schema", apierrors.NewInvalid(gk, "x", field.ErrorList{field.Required(field.NewPath("spec", "version"), "")}), false, "CRD's schema, not by the webhook"},
		{"the caller may not create clusters", apierrors.NewForbidden(gr, "x", errors.New("no")), false, "cannot tell"},
	} {
		ok, detail := WebhookVerdict(tc.err, "prod")
		if ok != tc.ok || !strings.Contains(detail, tc.phrase) {
			t.Errorf("%s: ok=%v %q, want ok=%v with %q", tc.name, ok, detail, tc.ok, tc.phrase)
		}
	}
}

// TestResumeUpgradeAsksOnlyWhenARolloutIsHalted: a request while nothing
// is halted would resume nothing, and a new request always differs from
// the last one.
func TestResumeUpgradeAsksOnlyWhenARolloutIsHalted(t *testing.T) {
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "bao"}}
	if _, err := ResumeRequest(c, now); !errors.Is(err, ErrNoHaltedRollout) {
		t.Errorf("no rollout: got %v", err)
	}
	c.Status.Upgrade = &v1alpha1.UpgradeStatus{TargetVersion: "2.4.1"}
	if _, err := ResumeRequest(c, now); !errors.Is(err, ErrNoHaltedRollout) {
		t.Errorf("a rollout under way: got %v", err)
	}
	c.Status.Upgrade.Halted = "PodReadyTimeout"
	got, err := ResumeRequest(c, now)
	if err != nil || got != "2026-05-01T10:00:00Z" {
		t.Errorf("halted: got %q, %v", got, err)
	}
	c.Status.Upgrade.ResumeRequest = got
	if again, err := ResumeRequest(c, now); err != nil || again == got {
		t.Errorf("a second request at the same instant: got %q, %v; want a new value", again, err)
	}
}

func TestOperatorVersionFromTheDeployment(t *testing.T) {
	d := func(labels map[string]string, images ...string) appsv1.Deployment {
		dep := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
		for i, img := range images {
			name := "sidecar"
			if i == len(images)-1 {
				name = "manager"
			}
			dep.Spec.Template.Spec.Containers = append(dep.Spec.Template.Spec.Containers, corev1.Container{Name: name, Image: img})
		}
		return dep
	}
	for _, tc := range []struct {
		dep           appsv1.Deployment
		version, from string
	}{
		{d(map[string]string{"app.kubernetes.io/version": "0.4.0"}, "ghcr.io/openbao/operator:0.3.9"), "0.4.0", "ghcr.io/openbao/operator:0.3.9"},
		{d(nil, "proxy:1", "localhost:5000/openbao/operator:0.5.0"), "0.5.0", "localhost:5000/openbao/operator:0.5.0"},
		{d(nil, "ghcr.io/openbao/operator@sha256:ab12"), "sha256:ab12", "ghcr.io/openbao/operator@sha256:ab12"},
		{d(nil, "localhost:5000/operator"), "unknown", "localhost:5000/operator"},
	} {
		v, img := OperatorVersion(tc.dep)
		if v != tc.version || img != tc.from {
			t.Errorf("got %q from %q, want %q from %q", v, img, tc.version, tc.from)
		}
	}
}
