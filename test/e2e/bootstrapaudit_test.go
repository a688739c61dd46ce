package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// bootstrapAudit is what the managers' audit lines say about one
// namespace's bootstrap.
type bootstrapAudit struct {
	initStarted []time.Time // "calling sys/init"
	initialized int         // sys/init answered and the token stored
	lost        int         // sys/init answered, the token could not be stored
	resets      int         // pod-0 wiped after a lost initialization
	firstStored time.Time
}

// readBootstrapAudit reads the audit lines of ns from every manager of the
// run: the killed ones (kept by killManager) and the running one.
func readBootstrapAudit(ctx context.Context, t *testing.T, cl client.Client, ns string) bootstrapAudit {
	t.Helper()
	logs := operatorLogs(ctx, t, cl)
	var a bootstrapAudit
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			TS        string `json:"ts"`
			Namespace string `json:"namespace"`
			EventType string `json:"event_type"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Namespace != ns {
			continue
		}
		ts, err := time.Parse(time.RFC3339Nano, line.TS)
		if err != nil && line.EventType != "" {
			t.Fatalf("audit line with an unreadable time %q: %v", line.TS, err)
		}
		switch line.EventType {
		case "openbao.bootstrap.init_started":
			a.initStarted = append(a.initStarted, ts)
		case "openbao.bootstrap.initialized":
			a.initialized++
			a.firstStored = ts
		case "openbao.bootstrap.root_token_lost":
			a.lost++
		case "openbao.bootstrap.reset":
			a.resets++
		}
	}
	// The running manager's lines come before the killed ones': order the
	// sys/init calls by time, so that the first is the first.
	slices.SortFunc(a.initStarted, time.Time.Compare)
	return a
}

// lostInside says whether a kill at killed may have cut a sys/init call
// short: one had started, and no token had been stored by then. (A kill
// between the log line and the request leaves OpenBao uninitialized: no
// reset follows.)
func (a bootstrapAudit) lostInside(killed time.Time) bool {
	return len(a.initStarted) > 0 && a.initStarted[0].Before(killed) && (a.firstStored.IsZero() || a.firstStored.After(killed))
}

// where says where a kill at killed landed relative to the first sys/init.
func (a bootstrapAudit) where(killed time.Time) string {
	switch {
	case len(a.initStarted) == 0:
		return "no sys/init logged"
	case killed.Before(a.initStarted[0]):
		return fmt.Sprintf("%s before sys/init", a.initStarted[0].Sub(killed).Round(time.Millisecond))
	case a.lostInside(killed):
		return fmt.Sprintf("inside sys/init (called %s before the kill)", killed.Sub(a.initStarted[0]).Round(time.Millisecond))
	default:
		return fmt.Sprintf("%s after the token was stored", killed.Sub(a.firstStored).Round(time.Millisecond))
	}
}

// refuseSecret makes the API server refuse to create a Secret of this name
// in ns, dry runs excepted (so the operator's dry-run check passes and its
// real write fails), until the returned func lifts the refusal. Both wait
// until the API server enforces the change, probed with a second name.
func refuseSecret(ctx context.Context, t *testing.T, cl client.Client, ns, name string) (lift func()) {
	t.Helper()
	const probe = "e2e-refusal-probe"
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-refuse-" + name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("request.dryRun || !(object.metadata.name in ['%s', '%s'])", name, probe),
				Message:    "e2e: this Secret is refused",
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: policy.Name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
			}},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := cl.Create(ctx, obj); err != nil {
			t.Fatalf("create %s: %v", obj.GetName(), err)
		}
	}
	remove := func() {
		for _, obj := range []client.Object{binding, policy} {
			if err := cl.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				t.Errorf("delete %s: %v", obj.GetName(), err)
			}
		}
	}
	t.Cleanup(remove)
	probeRefused := func() bool {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: probe, Namespace: ns}}
		err := cl.Create(ctx, s)
		if err == nil {
			_ = cl.Delete(ctx, s)
		}
		return err != nil
	}
	waitFor(ctx, t, 30*time.Second, "the refusal in force", func() (bool, string) { return probeRefused(), "" })
	return func() {
		remove()
		waitFor(ctx, t, 30*time.Second, "the refusal lifted", func() (bool, string) { return !probeRefused(), "" })
	}
}

// assertEventReason fails unless an Event of ns has this reason.
func assertEventReason(ctx context.Context, t *testing.T, cl client.Client, ns, reason string) {
	t.Helper()
	events, err := clientset(t).CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == reason {
			return
		}
	}
	t.Fatalf("no Event with reason %s in %s", reason, ns)
}
