package controllers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/openbao/operator/internal/openbao"
)

// memory is what the reconciler keeps of a cluster between passes, beside
// its status: what costs a request to learn again, or paces retries. It is
// keyed by the cluster's name and holds the UID it was learnt for, so a
// cluster deleted and created again under the same name starts afresh; it
// is released when the cluster is gone. An operator restart starts empty,
// which costs at most one extra request or retry per cluster.
type memory struct {
	mu       sync.Mutex
	clusters map[types.NamespacedName]*clusterMemory
}

type clusterMemory struct {
	uid types.UID
	// initFailures counts consecutive failed init attempts;
	// lastInitFailure is when the last one failed.
	initFailures    int
	lastInitFailure time.Time
	// autopilotSettled says the autopilot configuration of generation
	// autopilotGeneration is in place with every replica a voter.
	autopilotSettled    bool
	autopilotGeneration int64
	// markedInitialized says this operator wrote status.initialized: a
	// cache that still says otherwise lags that write.
	markedInitialized bool
	// upgradeToken is the OpenBao token of the upgrade role, kept until
	// upgradeTokenExpiry (before its own expiry).
	upgradeToken       openbao.Token
	upgradeTokenExpiry time.Time
	// referencesClean says the Secrets generation referencesGeneration of
	// the spec names were checked and none is the operator's: the check
	// reads each one exactly, so it runs again only when the spec changes.
	referencesClean      bool
	referencesGeneration int64
	// raftReadAt is when the autopilot state was last read for
	// status.raft: a read that changed nothing leaves the copy, and its
	// observedAt, as they were (raftstatus.Next).
	raftReadAt time.Time
	// standbyPolledAt is when a standby last listed its source's
	// snapshots: status.standby.polledAt moves only when a listing found
	// something new, so the poll is paced here.
	standbyPolledAt time.Time
}

// with runs f on the memory of the cluster, made afresh for a new UID.
func (m *memory) with(name types.NamespacedName, uid types.UID, f func(*clusterMemory)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.clusters == nil {
		m.clusters = map[types.NamespacedName]*clusterMemory{}
	}
	cm := m.clusters[name]
	if cm == nil || cm.uid != uid {
		cm = &clusterMemory{uid: uid}
		m.clusters[name] = cm
	}
	f(cm)
}

// forget releases the memory of a cluster that is gone.
func (m *memory) forget(name types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.clusters, name)
}

func (m *memory) has(name types.NamespacedName) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.clusters[name] != nil
}
