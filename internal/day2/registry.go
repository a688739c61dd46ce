package day2

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/openbao/operator/api/v1alpha1"
)

// Cluster names a cluster for the Registry: its namespace and name, and
// the UID its entries were made for.
type Cluster struct {
	types.NamespacedName
	UID types.UID
}

// ClusterOf is c's key.
func ClusterOf(c *v1alpha1.OpenBaoCluster) Cluster {
	return Cluster{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, UID: c.UID}
}

// Registry holds, per cluster, the operations this process started that
// the cache may not show yet. Every reconciler that starts an operation
// shares one: Start decides and records in one step under its lock, so
// two reconcilers cannot both pass inside the window in which the cache
// lags a status write. An entry goes once the cache shows the operation
// (running, ended, or its object gone), when its starter Releases a start
// that did not happen, or when the cluster is forgotten. A cluster made
// again under the same name (another UID) starts afresh. An operator
// restart starts empty: the cache of a new process is read after the
// writes of the old one. The nil Registry remembers nothing.
type Registry struct {
	mu       sync.Mutex
	clusters map[types.NamespacedName]*entries
}

type entries struct {
	uid types.UID
	ops []Op
}

// Check decides whether want may start beside what o shows and what this
// process started that o does not show yet; it records nothing.
func (r *Registry) Check(c Cluster, want Op, o Observation) Verdict {
	if r == nil {
		return Decide(want, o.Running)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return Decide(want, with(o.Running, r.settle(c, o)))
}

func with(a, b []Op) []Op { return append(append([]Op(nil), a...), b...) }

// Start decides as Check does and, when want may start, records it until
// the cache shows it. The caller then writes the start (the status that
// names its Job) and Releases it if that write or the create after it was
// refused.
func (r *Registry) Start(c Cluster, want Op, o Observation) Verdict {
	if r == nil {
		return Decide(want, o.Running)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	pending := r.settle(c, o)
	v := Decide(want, with(o.Running, pending))
	if v.OK() && !o.shows(o.Running, want) && !o.shows(pending, want) {
		if r.clusters == nil {
			r.clusters = map[types.NamespacedName]*entries{}
		}
		if r.clusters[c.NamespacedName] == nil {
			r.clusters[c.NamespacedName] = &entries{uid: c.UID}
		}
		e := r.clusters[c.NamespacedName]
		e.ops = append(e.ops, want)
	}
	return v
}

// settle drops the entries of c that o shows, and of another UID, and
// returns those left: started, and not yet seen.
func (r *Registry) settle(c Cluster, o Observation) []Op {
	e := r.clusters[c.NamespacedName]
	if e == nil {
		return nil
	}
	if e.uid != c.UID {
		delete(r.clusters, c.NamespacedName)
		return nil
	}
	e.ops = slices.DeleteFunc(e.ops, func(op Op) bool { return !o.lags(op) })
	return slices.Clone(e.ops)
}

// Release drops the entry of op: its start did not happen (the status
// write or the Job's create was refused), or its starter decided afresh
// not to start it.
func (r *Registry) Release(c Cluster, op Ref) {
	r.drop(c, func(o Op) bool { return o.Ref == op })
}

// ReleaseKind drops every entry of kind k: the one reconciler that starts
// operations of k (rollouts and drills) decided afresh that none starts.
func (r *Registry) ReleaseKind(c Cluster, k Kind) {
	r.drop(c, func(o Op) bool { return o.Kind == k })
}

func (r *Registry) drop(c Cluster, match func(Op) bool) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.clusters[c.NamespacedName]
	if e == nil || e.uid != c.UID {
		return
	}
	e.ops = slices.DeleteFunc(e.ops, match)
}

// Forget drops everything of a cluster that is gone.
func (r *Registry) Forget(name types.NamespacedName) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.clusters, name)
}

// Remembers says whether the Registry holds anything of the cluster; it
// is for tests that check memory is released.
func (r *Registry) Remembers(name types.NamespacedName) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.clusters[name] != nil
}
