package scale_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/openbao/operator/test/auditlog"
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

// countAudit counts the requests of user received in each span by verb
// and path, the benchmark's own scrape reviews left out.
func countAudit(path, user string, spans ...auditlog.Span) ([]map[string]float64, error) {
	return auditlog.Count(path, func(e auditlog.Event) bool {
		path, _, _ := strings.Cut(e.RequestURI, "?")
		return e.User.Username == user && !scrapeReview(path)
	}, normalPath, spans...)
}

// openWatches counts, by path, the watches of user open at the instant at:
// their response started before it and had not completed by then (a watch
// ends when the API server's timeout closes it, and its client watches
// again).
func openWatches(path, user string, at time.Time) (map[string]float64, error) {
	out := map[string]float64{}
	err := auditlog.Each(path, func(e auditlog.Event, u *url.URL) {
		if e.User.Username != user || e.Verb != "watch" || !e.StageAt.Before(at) {
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
func scrapeReviews(path, user string, s auditlog.Span) (float64, error) {
	var n float64
	err := auditlog.Each(path, func(e auditlog.Event, u *url.URL) {
		if e.User.Username == user && e.Stage == "ResponseComplete" && scrapeReview(u.Path) && s.Holds(e.Received) {
			n++
		}
	})
	return n, err
}

// scrapeReview says whether path is a TokenReview or SubjectAccessReview:
// the metrics endpoint asks those about the benchmark's own scrapes, which
// are no cost of the clusters.
func scrapeReview(path string) bool {
	return strings.HasSuffix(path, "/tokenreviews") || strings.HasSuffix(path, "/subjectaccessreviews")
}
