package scale_test

import (
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
)

// countingProxy stands between the operator and the API server: the
// operator speaks plain HTTP to it on loopback, and it forwards each
// request with the credentials of an admin user. It counts requests by
// verb (get, list and watch told apart, which client-go's metric cannot:
// all three are HTTP GETs) and by URL path with names left out, so the
// benchmark can say which requests make up the idle traffic.
type countingProxy struct {
	mu     sync.Mutex
	counts map[string]float64 // "VERB path" → requests
	server *http.Server
	url    string
}

func startProxy(b *testing.B, upstream *rest.Config, logPath string) *countingProxy {
	b.Helper()
	target, err := url.Parse(upstream.Host)
	if err != nil {
		b.Fatal(err)
	}
	transport, err := rest.TransportFor(upstream)
	if err != nil {
		b.Fatalf("proxy transport: %v", err)
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = logFile.Close() })
	errLog := log.New(logFile, "", log.LstdFlags)
	p := &countingProxy{counts: map[string]float64{}}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: transport,
		// Watches stream: pass every event on at once.
		FlushInterval: -1,
		// The operator ends its watches when it stops: not worth a line.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if !errors.Is(err, context.Canceled) {
				errLog.Printf("%s %s: %v", r.Method, r.URL, err)
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	p.url = "http://" + l.Addr().String()
	p.server = &http.Server{ErrorLog: errLog, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.count(r)
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = p.server.Serve(l) }()
	b.Cleanup(func() { _ = p.server.Close() })
	return p
}

func (p *countingProxy) count(r *http.Request) {
	key := requestKey(r.Method, r.URL)
	p.mu.Lock()
	p.counts[key]++
	p.mu.Unlock()
}

// snapshot copies the counters.
func (p *countingProxy) snapshot() map[string]float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]float64, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// requestKey names a request as the API server's audit log would: its verb
// and its resource path, with namespace and object names replaced, e.g.
// "get /api/v1/namespaces/{ns}/pods/{name}".
func requestKey(method string, u *url.URL) string {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	prefix := 0
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		prefix = 2
	case len(parts) >= 3 && parts[0] == "apis":
		prefix = 3
	default:
		return strings.ToLower(method) + " " + u.Path // discovery, /version, /openapi
	}
	rest := parts[prefix:]
	out := append([]string{}, parts[:prefix]...)
	if len(rest) >= 2 && rest[0] == "namespaces" {
		out = append(out, "namespaces", "{ns}")
		rest = rest[2:]
		if len(rest) == 0 { // the namespace object itself
			return verbOf(method, u, true) + " " + "/" + strings.Join(out[:len(out)-1], "/") + "/{name}"
		}
	}
	if len(rest) == 0 {
		return strings.ToLower(method) + " " + u.Path
	}
	out = append(out, rest[0])
	if len(rest) >= 2 {
		out = append(out, objectName(rest[1]))
		out = append(out, rest[2:]...)
	}
	return verbOf(method, u, len(rest) >= 2) + " /" + strings.Join(out, "/")
}

// benchCluster matches the names the benchmark gives its clusters, so that
// a child's name keeps its suffix: "{cluster}-tls-ca" says which Secret.
var benchCluster = regexp.MustCompile(`^bao-[0-9]{3}`)

func objectName(name string) string {
	if loc := benchCluster.FindStringIndex(name); loc != nil {
		return "{cluster}" + name[loc[1]:]
	}
	return "{name}"
}

// verbOf maps an HTTP method on a collection or an object to the API verb.
func verbOf(method string, u *url.URL, object bool) string {
	q := u.Query().Get("watch")
	switch {
	case method == http.MethodGet && (q == "true" || q == "1"):
		return "watch"
	case method == http.MethodGet && !object:
		return "list"
	case method == http.MethodGet:
		return "get"
	case method == http.MethodPost:
		return "create"
	case method == http.MethodPut:
		return "update"
	case method == http.MethodDelete && !object:
		return "deletecollection"
	default:
		return strings.ToLower(method)
	}
}

// diffCounts returns after - before, dropping keys that did not move,
// sorted by count, largest first.
func diffCounts(before, after map[string]float64) []keyCount {
	var out []keyCount
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out = append(out, keyCount{k, d})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].n != out[j].n {
			return out[i].n > out[j].n
		}
		return out[i].key < out[j].key
	})
	return out
}

type keyCount struct {
	key string
	n   float64
}

// byVerb sums keyed counts by their verb, the key's first word.
func byVerb(counts []keyCount) []keyCount {
	sums := map[string]float64{}
	for _, c := range counts {
		verb, _, _ := strings.Cut(c.key, " ")
		sums[verb] += c.n
	}
	return diffCounts(nil, sums)
}
