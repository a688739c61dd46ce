package envtest_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/test/testbin"
)

// warnings collects the API server's warning headers.
type warnings struct {
	sync.Mutex
	texts []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.Lock()
	defer w.Unlock()
	w.texts = append(w.texts, text)
}

func (w *warnings) take() []string {
	w.Lock()
	defer w.Unlock()
	out := w.texts
	w.texts = nil
	return out
}

// TestEvenReplicasAreAcceptedWithAWarning installs the admission policy of
// config/admission as the operator's installation does, and checks what a
// person running kubectl sees: a warning with the arithmetic when a cluster
// is created or resized to an even count, none for an odd count or for an
// update that leaves the count alone.
func TestEvenReplicasAreAcceptedWithAWarning(t *testing.T) {
	ctx := context.Background()
	applyConfig(t, "admission", "replicas-warning.yaml")
	seen := &warnings{}
	warnCfg := rest.CopyConfig(cfg)
	warnCfg.WarningHandler = seen
	warnClient, err := client.New(warnCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	createNamespace(t, "even")
	// The API server loads new policies asynchronously: probe until it warns.
	deadline := time.Now().Add(30 * time.Second)
	var got []string
	for i := 0; len(got) == 0; i++ {
		if time.Now().After(deadline) {
			t.Fatal("no warning for spec.replicas 4 after 30 s")
		}
		c := newCluster(t, "even", "metadata: {name: probe}\nspec: {version: 2.4.0, replicas: 4}")
		c.Name = "probe-" + string(rune('a'+i%26))
		if err := warnClient.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		got = seen.take()
		time.Sleep(200 * time.Millisecond)
	}
	if len(got) != 1 || !strings.Contains(got[0], "spec.replicas 4 is even") || !strings.Contains(got[0], "3 of 4") ||
		!strings.Contains(got[0], "prefer 3 or 5") {
		t.Fatalf("warnings %q, want one naming spec.replicas, the majority and the odd counts", got)
	}

	odd := newCluster(t, "even", "metadata: {name: odd}\nspec: {version: 2.4.0, replicas: 5}")
	if err := warnClient.Create(ctx, odd); err != nil {
		t.Fatal(err)
	}
	if w := seen.take(); len(w) != 0 {
		t.Fatalf("warnings %q for 5 replicas", w)
	}
	odd.Spec.Replicas = 6
	if err := warnClient.Update(ctx, odd); err != nil {
		t.Fatal(err)
	}
	if w := seen.take(); len(w) != 1 || !strings.Contains(w[0], "spec.replicas 6 is even") {
		t.Fatalf("warnings %q for a resize to 6", w)
	}
	odd.Spec.Image = "example.org/openbao"
	if err := warnClient.Update(ctx, odd); err != nil {
		t.Fatal(err)
	}
	if w := seen.take(); len(w) != 0 {
		t.Fatalf("warnings %q for an update that leaves 6 replicas alone", w)
	}
}

// applyConfig creates every object of a file under config/.
func applyConfig(t *testing.T, dir, file string) {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "config", dir, file))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			break
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := k8s.Create(context.Background(), obj); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
	}
}

// TestDisruptionBudgetsThatCostQuorumAreRefused installs the disruption
// budget policy of config/admission and checks that a budget letting a
// drain take quorum away is refused with the arithmetic, before anything
// is stored, and that budgets that keep quorum pass.
func TestDisruptionBudgetsThatCostQuorumAreRefused(t *testing.T) {
	ctx := context.Background()
	applyConfig(t, "admission", "disruption-budget.yaml")
	createNamespace(t, "budget")
	cluster := func(name string, replicas int, budget string) *v1alpha1.OpenBaoCluster {
		return newCluster(t, "budget", fmt.Sprintf("metadata: {name: %s}\nspec: {version: 2.4.0, replicas: %d, values: {podDisruptionBudget: %s}}",
			name, replicas, budget))
	}
	// The API server loads new policies asynchronously: probe until it refuses.
	waitUntil(t, 30*time.Second, "the budget policy in force", func() bool {
		probe := cluster("probe", 3, "{maxUnavailable: 2}")
		err := k8s.Create(ctx, probe)
		if err == nil {
			_ = k8s.Delete(ctx, probe)
		}
		return err != nil
	})
	refused := map[string]struct {
		replicas int
		budget   string
		message  string
	}{
		"two of three":      {3, "{maxUnavailable: 2}", "maxUnavailable 2 lets 2 of 3 servers go at once, but Raft needs 2 of 3 to keep quorum: at most 1 for 3 replicas"},
		"half of five":      {5, "{maxUnavailable: '50%'}", "maxUnavailable 50% lets 3 of 5 servers go at once, but Raft needs 3 of 5 to keep quorum: at most 2 for 5 replicas"},
		"enabled, explicit": {3, "{enabled: true, maxUnavailable: 3}", "lets 3 of 3 servers go at once"},
	}
	for name, tc := range refused {
		c := cluster("refused", tc.replicas, tc.budget)
		err := k8s.Create(ctx, c)
		if err == nil || !strings.Contains(err.Error(), tc.message) {
			t.Errorf("%s: got %v, want a refusal saying %q", name, err, tc.message)
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), &v1alpha1.OpenBaoCluster{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: a refused cluster is stored (%v)", name, err)
		}
	}
	for i, ok := range []*v1alpha1.OpenBaoCluster{
		cluster("one-of-three", 3, "{maxUnavailable: 1}"), cluster("two-of-five", 5, "{maxUnavailable: 2}"),
		cluster("disabled", 3, "{enabled: false, maxUnavailable: 2}"), cluster("a-third-of-five", 5, "{maxUnavailable: '34%'}"),
	} {
		if err := k8s.Create(ctx, ok); err != nil {
			t.Errorf("budget %d (%s) keeps quorum but was refused: %v", i, ok.Name, err)
		}
	}
	typedBudgetsFollowTheSameRule(t)
}

// typedBudgetsFollowTheSameRule: spec.podDisruptionBudget is held to the
// rule of spec.values.podDisruptionBudget, and the refusal names it.
func typedBudgetsFollowTheSameRule(t *testing.T) {
	ctx := context.Background()
	typed := func(name string, replicas int, budget string) *v1alpha1.OpenBaoCluster {
		return newCluster(t, "budget", fmt.Sprintf("metadata: {name: %s}\nspec: {version: 2.4.0, replicas: %d, podDisruptionBudget: %s}",
			name, replicas, budget))
	}
	for name, tc := range map[string]struct {
		replicas int
		budget   string
		message  string
	}{
		"two of three": {3, "{maxUnavailable: 2}", "spec.podDisruptionBudget.maxUnavailable 2 lets 2 of 3 servers go at once"},
		"half of five": {5, "{maxUnavailable: '50%'}", "spec.podDisruptionBudget.maxUnavailable 50% lets 3 of 5 servers go at once"},
	} {
		c := typed(fmt.Sprintf("typed-refused-%d", tc.replicas), tc.replicas, tc.budget)
		if err := k8s.Create(ctx, c); err == nil || !strings.Contains(err.Error(), tc.message) {
			t.Errorf("typed %s: got %v, want a refusal saying %q", name, err, tc.message)
		}
	}
	for i, ok := range []*v1alpha1.OpenBaoCluster{
		typed("typed-one-of-three", 3, "{maxUnavailable: 1}"), typed("typed-disabled", 3, "{enabled: false, maxUnavailable: 2}"),
		typed("typed-a-third-of-five", 5, "{maxUnavailable: '34%'}"),
	} {
		if err := k8s.Create(ctx, ok); err != nil {
			t.Errorf("typed budget %d (%s) keeps quorum but was refused: %v", i, ok.Name, err)
		}
	}
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
