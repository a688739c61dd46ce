package controllers

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// watchLifetime is the shortest time the API server keeps one of the
// cache's watches open; each gets a random lifetime in [watchLifetime,
// 2*watchLifetime), so that watches opened together end apart. Client-go's
// reflectors ask for 5-10 min (their MinWatchTimeout, which
// controller-runtime does not expose): an informer then re-opens each
// watch 6-12 times an hour, which for an idle install is most of its
// requests (bench-idle: 1.55 of 1.79 requests per cluster per minute in a
// tenancy install, where each served namespace has a watch per kind). 30
// min is the API server's own default for a watch that names no timeout
// (--min-request-timeout). A watch that ends early for any other reason is
// re-opened by the reflector as before; bookmarks keep it current.
const watchLifetime = 30 * time.Minute

// WithLongWatches wraps a cache constructor (nil: controller-runtime's) so
// that the cache's informers talk to the API server through a client whose
// watches last watchLifetime or longer.
func WithLongWatches(next cache.NewCacheFunc) cache.NewCacheFunc {
	if next == nil {
		next = cache.New
	}
	return func(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
		hc, err := longWatchClient(cfg)
		if err != nil {
			return nil, err
		}
		opts.HTTPClient = hc
		return next(cfg, opts)
	}
}

// longWatchClient is an HTTP client for cfg whose watch requests ask for a
// lifetime of at least watchLifetime.
func longWatchClient(cfg *rest.Config) (*http.Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper { return longWatches{next: next} })
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("create the cache's HTTP client: %w", err)
	}
	return hc, nil
}

// longWatches raises the timeoutSeconds of watch requests.
type longWatches struct{ next http.RoundTripper }

func (t longWatches) RoundTrip(req *http.Request) (*http.Response, error) {
	query, changed := watchQuery(req.URL.Query(), rand.Float64())
	if !changed {
		return t.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.URL.RawQuery = query.Encode()
	return t.next.RoundTrip(req)
}

// watchQuery returns the query of a request with the timeout of a watch
// raised to watchLifetime*(1+spread) (spread in [0, 1)), and whether it
// changed it: requests that are not watches, and watches that already ask
// for that long or longer, keep their query.
func watchQuery(q url.Values, spread float64) (url.Values, bool) {
	if w := q.Get("watch"); w != "true" && w != "1" {
		return q, false
	}
	if s, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && time.Duration(s)*time.Second >= watchLifetime {
		return q, false
	}
	lifetime := watchLifetime + time.Duration(spread*float64(watchLifetime))
	q.Set("timeoutSeconds", strconv.Itoa(int(lifetime/time.Second)))
	return q, true
}
