package envtest_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/openbao/operator/controllers"
)

// TestTheCachesWatchesAskForHalfAnHourOrMore builds the manager's cache as
// the operator does (ManagerOptions' NewCache) and records, below it, the
// requests that reach the real API server: each watch asks for 30 min or
// more, not client-go's 5-10 min. In a tenancy install, re-opened watches
// were most of an idle operator's requests (BENCHMARKS.md, bench-idle).
func TestTheCachesWatchesAskForHalfAnHourOrMore(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var timeouts []string
	recording := rest.CopyConfig(cfg)
	recording.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if q := req.URL.Query(); q.Get("watch") == "true" {
				mu.Lock()
				timeouts = append(timeouts, q.Get("timeoutSeconds"))
				mu.Unlock()
			}
			return next.RoundTrip(req)
		})
	})
	opts := controllers.ManagerOptions(controllers.ManagerSettings{Scheme: scheme})
	opts.Cache.Scheme = scheme
	newCache := opts.NewCache
	if newCache == nil {
		newCache = cache.New // what the manager does without one
	}
	c, err := newCache(recording, opts.Cache)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if _, err := c.GetInformer(ctx, &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		seen := append([]string(nil), timeouts...)
		mu.Unlock()
		if len(seen) > 0 {
			for _, s := range seen {
				if n, err := strconv.Atoi(s); err != nil || time.Duration(n)*time.Second < 30*time.Minute {
					t.Fatalf("a watch of the cache asked for timeoutSeconds=%q; want 1800 or more", s)
				}
			}
			t.Logf("the cache's watches asked for timeoutSeconds %v", seen)
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache opened no watch within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
