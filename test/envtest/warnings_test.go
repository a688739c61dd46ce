package envtest_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
