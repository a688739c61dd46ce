package nscache

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// source lists and watches one kind in one namespace.
type source interface {
	list(ctx context.Context, ns string) (items []runtime.Object, resourceVersion string, err error)
	watch(ctx context.Context, ns, resourceVersion string) (watch.Interface, error)
	// stub is an object of the kind with only its namespace and name: the
	// Deleted event of an object in a namespace no longer served.
	stub(ns, name string) runtime.Object
	// newList is an empty list of the kind, the answer of spread.List.
	newList() runtime.Object
}

// spread is the ListerWatcher behind the one informer of a namespaced kind:
// its List lists each served namespace, and the watch it hands the
// reflector carries the events of one watch per served namespace (a feed).
// An informer per namespace and kind costs about 13 goroutines and a 16 KiB
// handler buffer each (1.6 MiB per namespace at 12 kinds, bench-scale-tenancy);
// a feed costs its watch's stream and one goroutine.
//
// Namespaces join and leave while it runs, without a relist of the others:
// a joining namespace is listed and its objects sent as Added events, then
// watched from its list's resourceVersion; a leaving one's objects are sent
// as Deleted events of stubs (name and namespace only, so handlers mapping
// deletions by owner or label enqueue nothing for a namespace the operator
// just lost). The resourceVersion the reflector asks for is ignored: each
// namespace resumes from the last one delivered from it.
type spread struct {
	kind   string
	src    source
	log    logr.Logger
	events chan watch.Event // every watch handed to the reflector reads this channel

	mu         sync.Mutex
	indexer    toolscache.Indexer // the informer's, for the namespaces' sync
	synced     func() bool        // the informer's HasSynced
	ctx        context.Context    // the informer's run, from its latest List; nil before the first
	cancelBase context.CancelFunc // ends ctx
	gen        uint64             // bumped by each List: feeds of an older one stop
	listing    bool               // a List runs: it starts the feeds
	want       []string           // the namespaces to serve, normalized
	feeds      map[string]*feed
	leaving    map[string]chan struct{} // closed once a namespace's Deleted events are sent
	leavers    sync.WaitGroup           // the goroutines sending them
}

// feed follows one namespace. Its fields are guarded by spread.mu.
type feed struct {
	ns     string
	gen    uint64
	cancel context.CancelFunc
	done   chan struct{} // closed when the feed's goroutine returns
	// rv is the resourceVersion of the last event delivered from the
	// namespace ("" until it has been listed).
	rv string
	// known holds the names delivered present: the Deleted events to send
	// when the namespace leaves, and to send for what a relist lacks.
	known map[string]struct{}
	// viaList: the namespace was listed by the reflector's List, so it has
	// synced once the informer has.
	viaList  bool
	listDone bool
	// listErr is why the namespace's last list failed, while it has
	// never been listed: its reads fail with it rather than wait, and the
	// informer's sync does not wait for it.
	listErr error
	// relisting: the events delivered are a list's, whose resourceVersion
	// is the list's, set when all are delivered.
	relisting bool
	// pending maps the names of a joining namespace's list to the
	// resourceVersion the informer's store must show ("" for gone) before
	// the namespace counts as synced; nil once it has.
	pending map[string]string
}

var _ toolscache.ListerWatcherWithContext = (*spread)(nil)

func newSpread(kind string, src source, log logr.Logger) *spread {
	return &spread{
		kind: kind, src: src, log: log.WithValues("kind", kind),
		events: make(chan watch.Event), feeds: map[string]*feed{}, leaving: map[string]chan struct{}{},
	}
}

// bind gives the spread its informer's store and sync; call before the
// informer runs.
func (s *spread) bind(inf toolscache.SharedIndexInformer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.indexer, s.synced = inf.GetIndexer(), inf.HasSynced
}

// IsWatchListSemanticsUnSupported tells the reflector to list and then
// watch: a streaming list (sendInitialEvents) cannot span namespaces.
func (s *spread) IsWatchListSemanticsUnSupported() bool { return true }

// ListWithContext lists every served namespace afresh and restarts the
// feeds from the lists. The reflector calls it first, and again only after
// its watch failed, which the feeds never make it do.
func (s *spread) ListWithContext(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
	s.mu.Lock()
	s.gen++
	gen := s.gen
	s.listing = true
	old := s.feeds
	s.feeds = map[string]*feed{}
	want := slices.Clone(s.want)
	stopBase := s.cancelBase
	s.mu.Unlock()
	// Nobody reads the events while the reflector lists, so the old feeds
	// stop without delivering anything more.
	for _, f := range old {
		f.cancel()
		<-f.done
	}
	if stopBase != nil {
		// The leaving namespaces' senders run under it: they stop too,
		// before the reflector reads again (a Deleted event sent after
		// this List could delete what it listed).
		stopBase()
	}
	s.leavers.Wait()

	parts := listAll(ctx, s.src, want)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listing = false
	if s.gen != gen {
		return nil, errListTakenOver // only a stopped reflector's successor lists meanwhile
	}
	// The feeds' contexts derive from one of the standard type: under the
	// reflector's own (a channel's), each would cost a goroutine.
	base, cancel := context.WithCancel(ctx)
	s.ctx, s.cancelBase = base, cancel
	var items []runtime.Object
	for _, p := range parts {
		if _, ok := slices.BinarySearch(s.want, p.ns); !ok {
			continue // left while listed
		}
		if p.err != nil {
			// Left to its feed, which lists it again until it can; the
			// other namespaces are not held back by it.
			s.log.Error(p.err, "cannot list namespace", "namespace", p.ns)
			s.newFeedLocked(p.ns).listErr = p.err
			continue
		}
		f := s.newFeedLocked(p.ns)
		f.rv, f.viaList, f.listDone = p.rv, true, true
		for _, it := range p.items {
			f.known[nameOf(it)] = struct{}{}
		}
		items = append(items, p.items...)
	}
	s.reconcileLocked()
	list := s.src.newList()
	if err := apimeta.SetList(list, items); err != nil {
		return nil, err
	}
	// The reflector hands this back to Watch, which ignores it.
	list.(metav1.ListInterface).SetResourceVersion(strconv.FormatUint(gen, 10))
	return list, nil
}

var errListTakenOver = errors.New("a newer list of the namespaces took over")

// listConcurrency bounds the namespaces a List lists at once.
const listConcurrency = 4

type listed struct {
	ns    string
	items []runtime.Object
	rv    string
	err   error
}

func listAll(ctx context.Context, src source, namespaces []string) []listed {
	out := make([]listed, len(namespaces))
	sem := make(chan struct{}, listConcurrency)
	var wg sync.WaitGroup
	for i, ns := range namespaces {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			items, rv, err := src.list(ctx, ns)
			out[i] = listed{ns: ns, items: items, rv: rv, err: err}
		})
	}
	wg.Wait()
	return out
}

// WatchWithContext hands the reflector the spread's events. Stopping the
// watch stops nothing: an event is sent only when the reflector receives
// it, so the next watch goes on where this one ended.
func (s *spread) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return merged{s.events}, nil
}

// List and Watch serve a caller without a context (ListerWatcher).
func (s *spread) List(opts metav1.ListOptions) (runtime.Object, error) {
	return s.ListWithContext(context.TODO(), opts)
}

func (s *spread) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return s.WatchWithContext(context.TODO(), opts)
}

type merged struct{ ch chan watch.Event }

func (m merged) Stop()                          {}
func (m merged) ResultChan() <-chan watch.Event { return m.ch }

// setNamespaces makes the spread serve exactly want (normalized).
func (s *spread) setNamespaces(want []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.want = want
	s.reconcileLocked()
}

// reconcileLocked starts a feed for each namespace wanted without one and
// stops the feeds of namespaces no longer wanted. Before the first List,
// or while one runs, the List does it.
func (s *spread) reconcileLocked() {
	if s.ctx == nil || s.listing {
		return
	}
	for ns, f := range s.feeds {
		if _, ok := slices.BinarySearch(s.want, ns); !ok {
			delete(s.feeds, ns)
			f.cancel()
			done, earlier := make(chan struct{}), s.leaving[ns]
			s.leaving[ns] = done
			s.leavers.Go(func() { s.leave(f, earlier, done) })
		}
	}
	for _, ns := range s.want {
		if _, ok := s.feeds[ns]; !ok {
			s.newFeedLocked(ns)
		}
	}
}

// newFeedLocked starts the feed of a namespace.
func (s *spread) newFeedLocked(ns string) *feed {
	ctx, cancel := context.WithCancel(s.ctx)
	f := &feed{ns: ns, gen: s.gen, cancel: cancel, done: make(chan struct{}), known: map[string]struct{}{}}
	s.feeds[ns] = f
	after := s.leaving[ns]
	go func() {
		defer close(f.done)
		if after != nil {
			// The namespace left a moment ago: its Deleted events go first,
			// or one could land after this feed's Added event of the same
			// object.
			select {
			case <-after:
			case <-ctx.Done():
				return
			}
		}
		s.run(ctx, f)
	}()
	return f
}

// leave sends the Deleted events of a namespace no longer served, once its
// feed has stopped (so that nothing it delivered is missed), and closes
// done once they and those of an earlier leave of the namespace (earlier,
// nil if none runs) are sent: a namespace that flaps must not have an old
// leave's deletions land after a later join's additions.
func (s *spread) leave(f *feed, earlier <-chan struct{}, done chan struct{}) {
	defer func() {
		s.mu.Lock()
		if s.leaving[f.ns] == done {
			delete(s.leaving, f.ns)
		}
		s.mu.Unlock()
		close(done)
	}()
	<-f.done
	if earlier != nil {
		<-earlier
	}
	s.mu.Lock()
	names := make([]string, 0, len(f.known))
	for name := range f.known {
		names = append(names, name)
	}
	ctx := s.ctx
	s.mu.Unlock()
	for _, name := range names {
		if !s.send(ctx, f.gen, watch.Event{Type: watch.Deleted, Object: s.src.stub(f.ns, name)}) {
			return // a List replaced the store, or the informer stopped
		}
	}
}

// send delivers ev to the reflector, unless ctx ends or a List started
// after the sender's generation first.
func (s *spread) send(ctx context.Context, gen uint64, ev watch.Event) bool {
	s.mu.Lock()
	current := s.gen == gen
	s.mu.Unlock()
	if !current {
		return false
	}
	select {
	case s.events <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// feedRetryMin and feedRetryMax bound the wait before a feed lists or
// watches again after a failure.
const (
	feedRetryMin = time.Second
	feedRetryMax = time.Minute
)

// run follows a namespace until its feed is cancelled: list it unless its
// resourceVersion is known, watch from there, and again after the watch
// ends; a watch too old to resume (410 Gone) lists the namespace again.
func (s *spread) run(ctx context.Context, f *feed) {
	retry := feedRetryMin
	for ctx.Err() == nil {
		s.mu.Lock()
		rv := f.rv
		s.mu.Unlock()
		var err error
		if rv == "" {
			err = s.relist(ctx, f)
			if err != nil && ctx.Err() == nil {
				s.mu.Lock()
				if !f.listDone {
					f.listErr = err
				}
				s.mu.Unlock()
			}
		} else {
			err = s.follow(ctx, f, rv)
		}
		if err == nil {
			retry = feedRetryMin
			continue
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Error(err, "cannot follow namespace; retrying", "namespace", f.ns, "after", retry)
		select {
		case <-time.After(retry):
		case <-ctx.Done():
		}
		retry = min(2*retry, feedRetryMax)
	}
}

// relist lists the namespace and delivers its objects: as Added events
// the first time, as Modified events and Deleted events for what is gone
// after a watch could not resume.
func (s *spread) relist(ctx context.Context, f *feed) error {
	items, rv, err := s.src.list(ctx, f.ns)
	if err != nil {
		return err
	}
	s.mu.Lock()
	first := !f.listDone
	f.relisting = true
	present := make(map[string]struct{}, len(items))
	if first {
		f.pending = make(map[string]string, len(items))
	}
	for _, it := range items {
		present[nameOf(it)] = struct{}{}
		if first {
			f.pending[nameOf(it)] = rvOf(it)
		}
	}
	var gone []string
	for name := range f.known {
		if _, ok := present[name]; !ok {
			gone = append(gone, name)
		}
	}
	s.mu.Unlock()

	typ := watch.Added
	if !first {
		typ = watch.Modified // the store may hold it: an update, or an add where it does not
	}
	for _, it := range items {
		if !s.deliver(ctx, f, watch.Event{Type: typ, Object: it}) {
			return ctx.Err()
		}
	}
	for _, name := range gone {
		if !s.deliver(ctx, f, watch.Event{Type: watch.Deleted, Object: s.lastKnown(f.ns, name)}) {
			return ctx.Err()
		}
	}
	s.mu.Lock()
	f.rv, f.listDone, f.relisting, f.listErr = rv, true, false, nil
	s.mu.Unlock()
	return nil
}

// lastKnown is the store's copy of an object, so that a deletion seen by a
// relist reaches handlers as the object they knew; a stub if there is none.
func (s *spread) lastKnown(ns, name string) runtime.Object {
	s.mu.Lock()
	indexer := s.indexer
	s.mu.Unlock()
	if obj, ok, err := indexer.GetByKey(ns + "/" + name); err == nil && ok {
		if o, ok := obj.(runtime.Object); ok {
			return o
		}
	}
	return s.src.stub(ns, name)
}

// follow watches the namespace from rv and delivers its events until the
// watch ends. A watch that cannot resume clears the feed's resourceVersion
// (the next round lists).
func (s *spread) follow(ctx context.Context, f *feed, rv string) error {
	w, err := s.src.watch(ctx, f.ns, rv)
	if err != nil {
		if isGone(err) {
			s.forget(f)
			return nil
		}
		return err
	}
	defer w.Stop()
	started, events := time.Now(), 0
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				if events == 0 && time.Since(started) < time.Second {
					return errWatchEndedAtOnce // as the reflector does: back off, or it spins
				}
				return nil // ended (its lifetime, or the connection): resume from the last delivered
			}
			events++
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				if !s.deliver(ctx, f, ev) {
					return ctx.Err()
				}
			case watch.Bookmark:
				s.mu.Lock()
				f.rv = rvOf(ev.Object)
				s.mu.Unlock()
			case watch.Error:
				err := apierrors.FromObject(ev.Object)
				if isGone(err) {
					s.forget(f)
					return nil
				}
				return err
			}
		}
	}
}

var errWatchEndedAtOnce = errors.New("the watch ended at once without an event")

func (s *spread) forget(f *feed) {
	s.mu.Lock()
	f.rv = ""
	s.mu.Unlock()
}

func isGone(err error) bool { return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) }

// deliver sends ev and records what it delivered: the namespace's
// resourceVersion, the names present, and the versions a joining namespace
// waits for.
func (s *spread) deliver(ctx context.Context, f *feed, ev watch.Event) bool {
	if !s.send(ctx, f.gen, ev) {
		return false
	}
	name, rv := nameOf(ev.Object), rvOf(ev.Object)
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev.Type == watch.Deleted {
		delete(f.known, name)
		rv = "" // the store must not hold it
	} else {
		f.known[name] = struct{}{}
	}
	if _, tracked := f.pending[name]; tracked {
		f.pending[name] = rv
	}
	if v := rvOf(ev.Object); !f.relisting && v != "" {
		f.rv = v
	}
	return true
}

// namespaceSynced says whether the informer's store holds, for ns, at
// least what the namespace's first list held.
func (s *spread) namespaceSynced(ns string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.feeds[ns]
	switch {
	case f == nil:
		return false
	case f.viaList:
		return s.synced()
	case !f.listDone:
		return false
	}
	for name, want := range f.pending {
		obj, exists, err := s.indexer.GetByKey(ns + "/" + name)
		if err != nil {
			return false
		}
		if (want == "" && !exists) || (exists && rvOf(obj) == want) {
			delete(f.pending, name)
		}
	}
	if len(f.pending) > 0 {
		return false
	}
	f.pending = nil
	return true
}

// listError is why a served namespace that was never listed could not
// be, nil when it was or has not been tried yet.
func (s *spread) listError(ns string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.feeds[ns]; f != nil && !f.listDone {
		return f.listErr
	}
	return nil
}

// allSettled says whether every served namespace has synced or cannot be
// listed: the informer's sync, which the manager waits for before it
// starts the controllers (and gives up on, exiting, after its timeout),
// must not hang on one namespace whose rights are missing; that
// namespace's reads fail with the list's error until it can be listed.
func (s *spread) allSettled() bool {
	s.mu.Lock()
	want := slices.Clone(s.want)
	s.mu.Unlock()
	for _, ns := range want {
		if !s.namespaceSynced(ns) && s.listError(ns) == nil {
			return false
		}
	}
	return true
}

func nameOf(obj any) string {
	if m, err := apimeta.Accessor(obj); err == nil {
		return m.GetName()
	}
	return ""
}

func rvOf(obj any) string {
	if m, err := apimeta.Accessor(obj); err == nil {
		return m.GetResourceVersion()
	}
	return ""
}
