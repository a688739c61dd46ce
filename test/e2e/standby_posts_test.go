package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
)

// postLog is what a watch of a namespace saw of everything that can post
// a snapshot there: each OpenBaoRestore (its key), each Job a restore
// controls, and each pod such a Job controls. What posts is a restore
// Job's pod, so a snapshot posted twice shows as two Jobs (or two pods)
// for restores of one key, whatever the operator's status says. Objects
// are kept by UID: the operator deletes ended restores, and a restore
// created again under the same name is another object.
type postLog struct {
	mu       sync.Mutex
	restores map[types.UID]postedRestore
	jobs     map[types.UID]types.UID // a restore Job -> its restore
	pods     map[types.UID]types.UID // a pod of a restore Job -> that Job
	backups  map[types.UID]bool      // the Jobs of backups, whose pods are not posts
}

type postedRestore struct {
	name, key string
	standby   bool
	created   time.Time
	phase     v1alpha1.RestorePhase // the last seen
}

// watchPosts watches ns until the test ends. Each watch resumes from the
// last resourceVersion it saw, so that nothing created and deleted in
// between is missed; only when the API server no longer has that version
// does it list again, and the log says so.
func watchPosts(ctx context.Context, t testing.TB, ns string) *postLog {
	t.Helper()
	cfg, s := typedConfig(t)
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	p := &postLog{restores: map[types.UID]postedRestore{}, jobs: map[types.UID]types.UID{}, pods: map[types.UID]types.UID{},
		backups: map[types.UID]bool{}}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, list := range []client.ObjectList{&v1alpha1.OpenBaoRestoreList{}, &batchv1.JobList{}, &corev1.PodList{}} {
		rv := p.list(ctx, t, wc, ns, list) // before anything is created, so that the first watch misses nothing
		wg.Add(1)
		go func() { defer wg.Done(); p.follow(ctx, wc, ns, list, rv) }()
	}
	return p
}

func (p *postLog) list(ctx context.Context, t testing.TB, wc client.WithWatch, ns string, kind client.ObjectList) string {
	list := kind.DeepCopyObject().(client.ObjectList)
	if err := wc.List(ctx, list, client.InNamespace(ns)); err != nil {
		if t != nil {
			t.Fatal(err)
		}
		return ""
	}
	_ = meta.EachListItem(list, func(o runtime.Object) error { p.see(o); return nil })
	return list.GetResourceVersion()
}

func (p *postLog) follow(ctx context.Context, wc client.WithWatch, ns string, kind client.ObjectList, rv string) {
	for ctx.Err() == nil {
		if rv == "" {
			logf("postLog: listing %T again: what was created and deleted since the last event is not seen", kind)
			rv = p.list(ctx, nil, wc, ns, kind)
			if rv == "" {
				time.Sleep(time.Second)
				continue
			}
		}
		w, err := wc.Watch(ctx, kind.DeepCopyObject().(client.ObjectList), client.InNamespace(ns),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				if st, ok := ev.Object.(*metav1.Status); ok && st.Code == 410 {
					rv = ""
				}
				break
			}
			if o, ok := ev.Object.(client.Object); ok {
				rv = o.GetResourceVersion()
				if ev.Type != watch.Bookmark {
					p.see(o)
				}
			}
		}
		w.Stop()
	}
}

func (p *postLog) see(o runtime.Object) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch o := o.(type) {
	case *v1alpha1.OpenBaoRestore:
		r := p.restores[o.UID]
		r.name, r.standby, r.created = o.Name, o.Spec.Source.Standby, o.CreationTimestamp.Time
		if o.Status.Phase != "" {
			r.phase = o.Status.Phase
		}
		if k := o.Spec.Source.Key; k != "" {
			r.key = k
		} else if o.Status.Key != "" {
			r.key = o.Status.Key // latest: the key it resolved
		}
		p.restores[o.UID] = r
	case *batchv1.Job:
		if owner := metav1.GetControllerOf(o); owner != nil && owner.Kind == v1alpha1.RestoreKind {
			p.jobs[o.UID] = owner.UID
		} else {
			p.backups[o.UID] = true
		}
	case *corev1.Pod:
		if owner := metav1.GetControllerOf(o); owner != nil && owner.Kind == "Job" {
			p.pods[o.UID] = owner.UID
		}
	}
}

// check fails the test when a snapshot was posted twice (two restore Jobs
// or two pods for one key, the forming restore's included) other than as
// the standby posts again after a failed restore (each Job of another
// standby restore, every restore of the key but the last Failed, three at
// most), when a restore Job's restore or key was never seen, or when a
// restore of the standby was created after promotedAt (zero: not
// promoted).
func (p *postLog) check(t testing.TB, promotedAt time.Time) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	jobsOf := map[string][]types.UID{}
	for job, rs := range p.jobs {
		r, ok := p.restores[rs]
		if !ok || r.key == "" {
			t.Errorf("restore Job %s belongs to a restore %s whose key the watch never saw (%+v)", job, rs, r)
			continue
		}
		jobsOf[r.key] = append(jobsOf[r.key], job)
	}
	podsOf := map[types.UID]int{}
	for _, job := range p.pods {
		if !p.backups[job] {
			podsOf[job]++
		}
	}
	var posted []string
	for key, jobs := range jobsOf {
		for _, j := range jobs {
			if podsOf[j] > 1 {
				t.Errorf("snapshot %s posted more than once: restore Job %s ran %d pods", key, j, podsOf[j])
			}
		}
		if len(jobs) > 1 && !p.repostsLocked(jobs) {
			t.Errorf("snapshot %s posted more than once: %d restore Jobs", key, len(jobs))
		}
		posted = append(posted, key[strings.LastIndex(key, "/")+1:])
	}
	for _, r := range p.restores {
		if !promotedAt.IsZero() && r.standby && !r.created.Before(promotedAt.Truncate(time.Second)) {
			t.Errorf("OpenBaoRestore %s of %s was created at %s, after the promotion at %s", r.name, r.key, r.created, promotedAt)
		}
	}
	slices.Sort(posted)
	logf("what posts snapshots, as a watch saw it: %d OpenBaoRestores, %d restore Jobs, %d of their pods; the snapshots they posted: %v",
		len(p.restores), len(p.jobs), len(p.pods)-countBackupPods(p), posted)
}

// repostsLocked says whether the Jobs of one key are a standby's posts
// again after failed restores: at most three, each of another standby
// restore, every one of them but the last created Failed.
func (p *postLog) repostsLocked(jobs []types.UID) bool {
	var rs []postedRestore
	seen := map[types.UID]bool{}
	for _, j := range jobs {
		uid := p.jobs[j]
		if seen[uid] || !p.restores[uid].standby {
			return false
		}
		seen[uid] = true
		rs = append(rs, p.restores[uid])
	}
	slices.SortFunc(rs, func(a, b postedRestore) int { return a.created.Compare(b.created) })
	for _, r := range rs[:len(rs)-1] {
		if r.phase != v1alpha1.RestoreFailed {
			return false
		}
	}
	return len(rs) <= 3
}

func countBackupPods(p *postLog) int {
	n := 0
	for _, job := range p.pods {
		if p.backups[job] {
			n++
		}
	}
	return n
}

// killDuringStandbyRestore kills the manager while a restore of the
// standby runs (an OpenBaoRestore of it not ended). Kills are reserved
// only once the source holds a snapshot the standby has not posted, so
// that its next poll (within standbyPoll) posts one; a restore that ended
// before the kill could land is let go, and the next snapshot tried.
func (d *drDrill) killDuringStandbyRestore(ctx context.Context, t *testing.T) {
	t.Helper()
	prefix := backup.ObjectPrefix("site-a", d.siteA, "bao")
	for attempt := 1; attempt <= 3; attempt++ {
		// The kill is reserved before the wait for the post: a test holding
		// kills off (an alert's window) could otherwise keep the
		// reservation past the whole restore (a cold CI run: three
		// snapshots posted and restored while this test waited for it).
		end := reserveKills(t)
		var posted string
		waitEvery(ctx, t, time.Second, 3*time.Minute, "a snapshot of the source the standby has not posted", func() (bool, string) {
			posted = standbyStatus(ctx, t, d.cl, d.siteB).RestoreKey
			keys := objectKeys(ctx, t, d.m, prefix)
			return len(keys) > 0 && slices.Max(keys) > posted, posted
		})
		rs := &v1alpha1.OpenBaoRestore{}
		waitEvery(ctx, t, 100*time.Millisecond, 3*time.Minute, "the standby posting a newer snapshot", func() (bool, string) {
			st := standbyStatus(ctx, t, d.cl, d.siteB)
			if st.RestoreKey <= posted {
				return false, fmt.Sprintf("%+v; %s", st, standbyConditions(ctx, t, d.cl, d.siteB))
			}
			err := d.cl.Get(ctx, client.ObjectKey{Namespace: d.siteB, Name: st.Restore}, rs)
			if apierrors.IsNotFound(err) && st.ServedKey == st.RestoreKey {
				rs.Status.Phase = v1alpha1.RestoreSucceeded // ended and deleted already
				return true, ""
			}
			return err == nil, fmt.Sprint(err)
		})
		if !rs.Status.Phase.Done() {
			at := fmt.Sprintf("OpenBaoRestore %s %s/%s", rs.Name, rs.Status.Phase, rs.Status.Step)
			killReserved(ctx, t, d.cl)
			end()
			logf("the operator killed while %s ran (of %s)", at, rs.Spec.Source.Key)
			return
		}
		end()
		logf("the standby's restore %s ended before the kill could land (attempt %d); trying the next snapshot", rs.Name, attempt)
	}
	t.Fatal("no restore of the standby was seen running in three snapshots")
}

// promotionState says how far the promotion got: recorded or not, and
// whether the client Service has a ready endpoint.
func promotionState(ctx context.Context, t testing.TB, cl client.Client, ns string) string {
	t.Helper()
	st := standbyStatus(ctx, t, cl, ns)
	eps := &discoveryv1.EndpointSliceList{}
	if err := cl.List(ctx, eps, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: "dr"}); err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, s := range eps.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				ready++
			}
		}
	}
	return fmt.Sprintf("status.standby.promotedAt %v, %d ready endpoints of the client Service", st.PromotedAt, ready)
}

// eventCount counts the Events of reason in ns, each as many times as its
// series says it happened.
func eventCount(ctx context.Context, t testing.TB, cl client.Client, ns, reason string) int {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := cl.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		switch {
		case e.Reason != reason:
		case e.Series != nil:
			n += int(e.Series.Count)
		default:
			n++
		}
	}
	return n
}
