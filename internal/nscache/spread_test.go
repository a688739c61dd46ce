package nscache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// fakeSource is an API server of ConfigMaps whose watches the tests end,
// break and expire at will.
type fakeSource struct {
	mu       sync.Mutex
	rv       int
	objs     map[string]map[string]*corev1.ConfigMap // namespace, name
	watches  map[string]*watch.FakeWatcher           // the latest watch of each namespace
	watchRVs map[string][]string                     // the resourceVersions watches were opened from
	lists    map[string]int
	listErr  map[string]error
	expired  map[string]bool // the next watch of the namespace is refused as too old
}

func newFakeSource() *fakeSource {
	return &fakeSource{
		objs: map[string]map[string]*corev1.ConfigMap{}, watches: map[string]*watch.FakeWatcher{},
		watchRVs: map[string][]string{}, lists: map[string]int{}, listErr: map[string]error{}, expired: map[string]bool{},
	}
}

// put creates or updates an object; unless quiet, the namespace's watch
// hears of it.
func (f *fakeSource) put(ns, name string, quiet bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv++
	if f.objs[ns] == nil {
		f.objs[ns] = map[string]*corev1.ConfigMap{}
	}
	typ := watch.Modified
	if f.objs[ns][name] == nil {
		typ = watch.Added
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: strconv.Itoa(f.rv),
		Labels: map[string]string{"app": "x"}}}
	f.objs[ns][name] = cm
	if w := f.watches[ns]; w != nil && !quiet {
		w.Action(typ, cm.DeepCopy())
	}
}

func (f *fakeSource) del(ns, name string, quiet bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv++
	cm := f.objs[ns][name]
	delete(f.objs[ns], name)
	if w := f.watches[ns]; w != nil && !quiet {
		cm = cm.DeepCopy()
		cm.ResourceVersion = strconv.Itoa(f.rv)
		w.Delete(cm)
	}
}

func (f *fakeSource) list(_ context.Context, ns string) ([]runtime.Object, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists[ns]++
	if err := f.listErr[ns]; err != nil {
		return nil, "", err
	}
	var items []runtime.Object
	for _, name := range slices.Sorted(mapsKeys(f.objs[ns])) {
		items = append(items, f.objs[ns][name].DeepCopy())
	}
	return items, strconv.Itoa(f.rv), nil
}

func (f *fakeSource) watch(_ context.Context, ns, rv string) (watch.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watchRVs[ns] = append(f.watchRVs[ns], rv)
	if f.expired[ns] {
		f.expired[ns] = false
		return nil, apierrors.NewResourceExpired("too old resource version")
	}
	w := watch.NewFakeWithChanSize(100, false)
	f.watches[ns] = w
	return w, nil
}

func (f *fakeSource) stub(ns, name string) runtime.Object {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func (f *fakeSource) newList() runtime.Object { return &corev1.ConfigMapList{} }

func (f *fakeSource) currentWatch(ns string) *watch.FakeWatcher {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.watches[ns]
}

func (f *fakeSource) counts(ns string) (lists int, watchRVs []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists[ns], slices.Clone(f.watchRVs[ns])
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// deletions records the Deleted events handlers hear.
type deletions struct {
	mu   sync.Mutex
	objs []*corev1.ConfigMap
}

func (d *deletions) OnAdd(any, bool)   {}
func (d *deletions) OnUpdate(any, any) {}
func (d *deletions) OnDelete(obj any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		d.objs = append(d.objs, cm)
	}
}

func (d *deletions) of(ns string) []*corev1.ConfigMap {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*corev1.ConfigMap
	for _, cm := range d.objs {
		if cm.Namespace == ns {
			out = append(out, cm)
		}
	}
	return out
}

// runSpread runs an informer over a spread of src serving namespaces.
func runSpread(t *testing.T, src source, namespaces ...string) (*spread, toolscache.SharedIndexInformer, *deletions) {
	t.Helper()
	s := newSpread("ConfigMap", src, log.Log)
	s.setNamespaces(normalize(namespaces))
	inf := toolscache.NewSharedIndexInformerWithOptions(s, &corev1.ConfigMap{}, toolscache.SharedIndexInformerOptions{
		Indexers: toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc},
	})
	s.bind(inf)
	d := &deletions{}
	if _, err := inf.AddEventHandler(d); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inf.RunWithContext(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	return s, inf, d
}

// storeHolds waits until the store's objects of ns are exactly want
// (name=resourceVersion of the source, read when called).
func storeHolds(t *testing.T, inf toolscache.SharedIndexInformer, src *fakeSource, ns string) {
	t.Helper()
	src.mu.Lock()
	want := map[string]string{}
	for name, cm := range src.objs[ns] {
		want[name] = cm.ResourceVersion
	}
	src.mu.Unlock()
	waitFor(t, fmt.Sprintf("the store's %s to be %v", ns, want), func() bool {
		objs, _ := inf.GetIndexer().ByIndex(toolscache.NamespaceIndex, ns)
		got := map[string]string{}
		for _, o := range objs {
			cm := o.(*corev1.ConfigMap)
			got[cm.Name] = cm.ResourceVersion
		}
		return mapsEqual(got, want)
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestANamespaceJoinsAndLeavesWithoutARelistOfTheOthers(t *testing.T) {
	src := newFakeSource()
	src.put("a", "a1", false)
	src.put("b", "b1", false)
	src.put("b", "b2", false)
	s, inf, dels := runSpread(t, src, "a")
	storeHolds(t, inf, src, "a")
	if s.namespaceSynced("b") {
		t.Fatal("b counts as synced before it is served")
	}

	s.setNamespaces([]string{"a", "b"})
	waitFor(t, "b to sync", func() bool { return s.namespaceSynced("b") })
	storeHolds(t, inf, src, "b") // synced means the store holds what b's list held
	src.put("b", "b3", false)
	storeHolds(t, inf, src, "b")

	s.setNamespaces([]string{"b"})
	waitFor(t, "a's objects to leave the store", func() bool {
		objs, _ := inf.GetIndexer().ByIndex(toolscache.NamespaceIndex, "a")
		return len(objs) == 0
	})
	for _, cm := range dels.of("a") {
		if len(cm.Labels) > 0 || len(cm.OwnerReferences) > 0 {
			t.Fatalf("a leaving namespace's deletion carried %v: handlers would map it to its owner", cm.ObjectMeta)
		}
	}
	if got := len(dels.of("a")); got != 1 {
		t.Fatalf("%d deletions heard in the leaving namespace, want 1", got)
	}
	if s.namespaceSynced("a") {
		t.Fatal("a counts as synced after it left")
	}
	if lists, _ := src.counts("b"); lists != 1 {
		t.Fatalf("b listed %d times, want once: namespaces joining and leaving relist nothing else", lists)
	}
	if lists, _ := src.counts("a"); lists != 1 {
		t.Fatalf("a listed %d times, want once", lists)
	}
}

func TestARejoiningNamespaceKeepsItsObjects(t *testing.T) {
	src := newFakeSource()
	for i := range 20 {
		src.put("a", fmt.Sprintf("a%d", i), false)
	}
	s, inf, _ := runSpread(t, src, "a", "b")
	for round := range 30 {
		s.setNamespaces([]string{"b"})
		if round%2 == 0 {
			time.Sleep(time.Millisecond) // some rounds rejoin mid-leave, others at once
		}
		if round%3 == 0 {
			// It flaps: left again before its join listed, and back.
			s.setNamespaces([]string{"a", "b"})
			s.setNamespaces([]string{"b"})
		}
		s.setNamespaces([]string{"a", "b"})
		waitFor(t, "a to sync", func() bool { return s.namespaceSynced("a") })
		// The leaving's Deleted events come before the rejoining's Added
		// ones, never after: the store ends with every object.
		storeHolds(t, inf, src, "a")
	}
}

func TestAWatchThatEndsResumesWhereItsEventsEnded(t *testing.T) {
	src := newFakeSource()
	src.put("a", "a1", false)
	s, inf, _ := runSpread(t, src, "a")
	waitFor(t, "a's watch", func() bool { return src.currentWatch("a") != nil })
	src.put("a", "a2", false)
	storeHolds(t, inf, src, "a")
	_, before := src.counts("a")
	src.currentWatch("a").Stop() // the API server ends it (its lifetime)
	waitFor(t, "a new watch", func() bool { _, rvs := src.counts("a"); return len(rvs) == len(before)+1 })
	_, rvs := src.counts("a")
	if got, want := rvs[len(rvs)-1], "2"; got != want {
		t.Fatalf("the watch resumed from %q, want %q (a2's, the last delivered)", got, want)
	}
	if lists, _ := src.counts("a"); lists != 1 {
		t.Fatalf("a listed %d times, want once: a watch that ends resumes", lists)
	}
	src.put("a", "a3", false)
	storeHolds(t, inf, src, "a")
	if !s.namespaceSynced("a") {
		t.Fatal("a not synced")
	}
}

func TestAWatchTooOldToResumeRelistsItsNamespaceOnly(t *testing.T) {
	src := newFakeSource()
	src.put("a", "gone", false)
	src.put("a", "changed", false)
	src.put("b", "b1", false)
	_, inf, dels := runSpread(t, src, "a", "b")
	waitFor(t, "a's watch", func() bool { return src.currentWatch("a") != nil })
	storeHolds(t, inf, src, "a")

	// Changes the watch never delivers, then the watch is refused as too
	// old (410), as after a long disconnection.
	src.del("a", "gone", true)
	src.put("a", "changed", true)
	src.put("a", "new", true)
	src.mu.Lock()
	src.expired["a"] = true
	src.mu.Unlock()
	src.currentWatch("a").Stop()

	storeHolds(t, inf, src, "a")
	if lists, _ := src.counts("a"); lists != 2 {
		t.Fatalf("a listed %d times, want twice (the relist)", lists)
	}
	if lists, _ := src.counts("b"); lists != 1 {
		t.Fatalf("b listed %d times, want once", lists)
	}
	if got := dels.of("a"); len(got) != 1 || got[0].Labels["app"] != "x" {
		t.Fatalf("deletions heard: %v, want the store's copy of a/gone (labels kept, so handlers find its owner)", got)
	}

	// The same through an Error event on an open watch.
	src.put("a", "later", true)
	src.currentWatch("a").Error(&apierrors.NewGone("gone").ErrStatus)
	storeHolds(t, inf, src, "a")
}

func TestANamespaceThatCannotBeListedHoldsBackOnlyItself(t *testing.T) {
	src := newFakeSource()
	src.put("a", "a1", false)
	src.put("b", "b1", false)
	src.mu.Lock()
	src.listErr["b"] = apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("no binding yet"))
	src.mu.Unlock()
	s, inf, _ := runSpread(t, src, "a", "b")
	storeHolds(t, inf, src, "a")
	if !s.namespaceSynced("a") || s.namespaceSynced("b") {
		t.Fatalf("synced: a %v, b %v; want a only", s.namespaceSynced("a"), s.namespaceSynced("b"))
	}
	// The informer's sync does not wait for b, and b's reads get its error.
	if !s.allSettled() || !apierrors.IsForbidden(s.listError("b")) || s.listError("a") != nil {
		t.Fatalf("settled %v, b's error %v, a's %v; want settled with b's Forbidden", s.allSettled(), s.listError("b"), s.listError("a"))
	}
	src.mu.Lock()
	src.listErr["b"] = nil
	src.mu.Unlock()
	waitFor(t, "b to sync once it can be listed", func() bool { return s.namespaceSynced("b") })
	storeHolds(t, inf, src, "b")
	if s.listError("b") != nil {
		t.Fatalf("b listed, its error kept: %v", s.listError("b"))
	}
}

// A namespace that joins and cannot be listed is settled once its list has
// failed, not before: the sync waits for one answer of each namespace.
func TestAJoiningNamespaceSettlesOnceItsListAnswered(t *testing.T) {
	src := newFakeSource()
	src.put("a", "a1", false)
	s, _, _ := runSpread(t, src, "a")
	src.mu.Lock()
	src.listErr["c"] = apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("no binding yet"))
	src.mu.Unlock()
	s.setNamespaces(normalize([]string{"a", "c"}))
	waitFor(t, "c's failed list to settle the spread", s.allSettled)
	if s.namespaceSynced("c") || !apierrors.IsForbidden(s.listError("c")) {
		t.Fatalf("c synced %v, error %v", s.namespaceSynced("c"), s.listError("c"))
	}
}
