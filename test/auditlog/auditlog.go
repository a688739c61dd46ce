// Package auditlog counts the requests a Kubernetes API server's audit log
// (audit.k8s.io/v1 events, one JSON object per line) records, by verb and
// path, in time windows. The benchmarks count the operator's requests with
// it, where no hop between the operator and the API server adds cost.
package auditlog

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Event is the part of an audit event a count needs.
type Event struct {
	Stage      string    `json:"stage"`
	Verb       string    `json:"verb"`
	RequestURI string    `json:"requestURI"`
	Received   time.Time `json:"requestReceivedTimestamp"`
	StageAt    time.Time `json:"stageTimestamp"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
}

// Span is a time window whose requests are counted: From included, To not.
type Span struct{ From, To time.Time }

// Holds says whether t falls in the span.
func (s Span) Holds(t time.Time) bool { return !t.Before(s.From) && t.Before(s.To) }

// Count counts the requests received in each span whose event keep
// accepts, keyed "verb path" with the path as normal gives it (NormalPath
// puts placeholders for namespaces and names, so that requests about
// different objects add up). A watch is counted once, when its response
// starts; every other request when it completes.
func Count(path string, keep func(Event) bool, normal func(string) string, spans ...Span) ([]map[string]float64, error) {
	out := make([]map[string]float64, len(spans))
	for i := range out {
		out[i] = map[string]float64{}
	}
	err := Each(path, func(e Event, u *url.URL) {
		if e.Stage != countedStage(e.Verb) || !keep(e) {
			return
		}
		for i, s := range spans {
			if s.Holds(e.Received) {
				out[i][e.Verb+" "+normal(u.Path)]++
			}
		}
	})
	return out, err
}

// Each calls fn with every event of the log and its parsed request URI.
func Each(path string, fn func(Event, *url.URL)) error {
	// A rotated log would lose the start of the run without a sign.
	if rotated, _ := filepath.Glob(strings.TrimSuffix(path, ".log") + "-*.log"); len(rotated) > 0 {
		return fmt.Errorf("the API server rotated its audit log (%s): counts would be short", rotated[0])
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("audit log %s: %w", path, err)
		}
		if u, err := url.ParseRequestURI(e.RequestURI); err == nil {
			fn(e, u)
		}
	}
	return sc.Err()
}

func countedStage(verb string) string {
	if verb == "watch" {
		return "ResponseStarted"
	}
	return "ResponseComplete"
}

// Writes says whether a "verb path" key is a write.
func Writes(key string) bool {
	verb, _, _ := strings.Cut(key, " ")
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// NormalPath replaces the namespace and object name in an API path by
// placeholders, so that requests about different clusters add up.
func NormalPath(p string) string {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for i := range parts {
		if i > 0 && parts[i-1] == "namespaces" {
			parts[i] = "{ns}"
			if i+2 < len(parts) {
				parts[i+2] = "{name}"
			}
		}
	}
	return "/" + strings.Join(parts, "/")
}
