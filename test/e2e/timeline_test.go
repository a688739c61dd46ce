package e2e_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// timeline records when each event of one benchmark run was first seen,
// relative to the run's start. The pod poller and the run itself mark it
// from two goroutines.
type timeline struct {
	start  time.Time // set before either goroutine marks anything
	mu     sync.Mutex
	events []timedEvent
}

type timedEvent struct {
	name string
	at   time.Duration
}

// mark records the event unless it was seen before: only the first time
// counts.
func (tl *timeline) mark(name string) {
	at := time.Since(tl.start)
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, e := range tl.events {
		if e.name == name {
			return
		}
	}
	tl.events = append(tl.events, timedEvent{name, at})
}

// at returns when the event was first seen.
func (tl *timeline) at(name string) (time.Duration, bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, e := range tl.events {
		if e.name == name {
			return e.at, true
		}
	}
	return 0, false
}

// String lists the events in time order: "pod-0 seen 0.48s, ...".
func (tl *timeline) String() string {
	tl.mu.Lock()
	events := append([]timedEvent(nil), tl.events...)
	tl.mu.Unlock()
	sort.SliceStable(events, func(i, j int) bool { return events[i].at < events[j].at })
	parts := make([]string, len(events))
	for i, e := range events {
		parts[i] = fmt.Sprintf("%s %.2fs", e.name, e.at.Seconds())
	}
	return strings.Join(parts, ", ")
}

// watchPods lists the namespace's pods every 100 ms until ctx ends and
// marks what each pod shows for the first time; probe, when not nil, runs
// on the same tick for what is not on a pod (the CR's status). It marks
// when each data volume is bound too: when the kubelet's first sync of a
// pod fails (its claim not bound yet, or the node authorizer not yet aware
// of the claim), the kubelet retries only after a 10 to 15 s back-off, and
// the mark tells the first cause apart.
func watchPods(ctx context.Context, cl client.Client, ns string, tl *timeline, probe func(context.Context)) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace(ns)); err == nil {
			for i := range pods.Items {
				markPod(tl, &pods.Items[i])
			}
		}
		var claims corev1.PersistentVolumeClaimList
		if err := cl.List(ctx, &claims, client.InNamespace(ns)); err == nil {
			for _, c := range claims.Items {
				if c.Status.Phase == corev1.ClaimBound {
					tl.mark(ordinalName(c.Name) + " volume bound")
				}
			}
		}
		if probe != nil {
			probe(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// markPod marks one pod's state. OpenBao sets the service-registration
// labels on its own pod as soon as its process runs, often before the
// kubelet reports the container Running, so the label's presence is the
// earliest sign that bao is up.
func markPod(tl *timeline, p *corev1.Pod) {
	short := ordinalName(p.Name)
	tl.mark(short + " seen")
	if _, ok := p.Labels["openbao-initialized"]; ok {
		tl.mark(short + " bao up")
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == "openbao" && s.State.Running != nil {
			tl.mark(short + " running")
		}
	}
	if short == "pod-0" && p.Labels["openbao-initialized"] == "true" {
		tl.mark("pod-0 initialized")
	}
	if p.Labels["openbao-sealed"] == "false" {
		tl.mark(short + " unsealed")
	}
}

// ordinalName names a server by its ordinal, "pod-0", from the name of its
// pod (bao-0) or of its data volume claim (data-bao-0).
func ordinalName(name string) string {
	return "pod-" + name[strings.LastIndex(name, "-")+1:]
}
