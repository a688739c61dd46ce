package scale_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// operatorUser is the name the operator authenticates as; the audit policy
// records this user's requests only.
const operatorUser = "openbao-operator"

// The API server's audit log names every request the operator makes, with
// no hop added between them: a proxy in the path doubled the time of a
// reconcile pass on 2 cores. Metadata level, the operator's users only
// (the tenancy install's provisioner too), written in batches off the
// request path.
func auditPolicy(users ...string) string {
	quoted := make([]string, len(users))
	for i, u := range users {
		quoted[i] = strconv.Quote(u)
	}
	return `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: [` + strings.Join(quoted, ", ") + `]
- level: None
`
}

// enableAudit makes envtest's API server write the requests of users to
// dir/audit.log and returns that path.
func enableAudit(env *envtest.Environment, dir string, users ...string) (string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy(users...)), 0o644); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "audit.log")
	env.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", path).
		Set("audit-log-mode", "batch").
		// The default rotates at 100 MB, which 200 clusters fill in minutes.
		Set("audit-log-maxsize", "100000")
	return path, nil
}

// auditEvent is the part of an audit.k8s.io/v1 Event the count needs.
type auditEvent struct {
	Stage      string    `json:"stage"`
	Verb       string    `json:"verb"`
	RequestURI string    `json:"requestURI"`
	Received   time.Time `json:"requestReceivedTimestamp"`
	StageAt    time.Time `json:"stageTimestamp"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
}

// span is a time window whose requests are counted.
type span struct{ from, to time.Time }

// countAudit counts the requests of user received in each span by verb
// and path. A watch is counted once, when its response starts; every
// other request when it completes.
func countAudit(path, user string, spans ...span) ([]map[string]float64, error) {
	out := make([]map[string]float64, len(spans))
	for i := range out {
		out[i] = map[string]float64{}
	}
	err := eachAudit(path, user, func(e auditEvent, u *url.URL) {
		if e.Stage != stageCounted(e.Verb) || scrapeReview(u.Path) {
			return
		}
		for i, s := range spans {
			if !e.Received.Before(s.from) && e.Received.Before(s.to) {
				out[i][e.Verb+" "+normalPath(u.Path)]++
			}
		}
	})
	return out, err
}

// openWatches counts, by path, the watches of user open at the instant at:
// their response started before it and had not completed by then (a watch
// ends when the API server's timeout closes it, and its client watches
// again).
func openWatches(path, user string, at time.Time) (map[string]float64, error) {
	out := map[string]float64{}
	err := eachAudit(path, user, func(e auditEvent, u *url.URL) {
		if e.Verb != "watch" || !e.StageAt.Before(at) {
			return
		}
		switch e.Stage {
		case "ResponseStarted":
			out[normalPath(u.Path)]++
		case "ResponseComplete":
			out[normalPath(u.Path)]--
		}
	})
	return out, err
}

// scrapeReviews counts the TokenReviews and SubjectAccessReviews user
// created in the span: in an idle window, the operator's metrics endpoint
// asks those about the benchmark's scrapes only, and its client counts
// them as writes.
func scrapeReviews(path, user string, s span) (float64, error) {
	var n float64
	err := eachAudit(path, user, func(e auditEvent, u *url.URL) {
		if e.Stage == "ResponseComplete" && scrapeReview(u.Path) && !e.Received.Before(s.from) && e.Received.Before(s.to) {
			n++
		}
	})
	return n, err
}

// eachAudit calls fn with each audit event of user.
func eachAudit(path, user string, fn func(auditEvent, *url.URL)) error {
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
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("audit log %s: %w", path, err)
		}
		if e.User.Username != user {
			continue
		}
		u, err := url.ParseRequestURI(e.RequestURI)
		if err != nil {
			continue
		}
		fn(e, u)
	}
	return sc.Err()
}

// scrapeReview says whether path is a TokenReview or SubjectAccessReview:
// the metrics endpoint asks those about the benchmark's own scrapes, which
// are no cost of the clusters.
func scrapeReview(path string) bool {
	return strings.HasSuffix(path, "/tokenreviews") || strings.HasSuffix(path, "/subjectaccessreviews")
}

func stageCounted(verb string) string {
	if verb == "watch" {
		return "ResponseStarted"
	}
	return "ResponseComplete"
}
