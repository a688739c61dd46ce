package controllers

import (
	"net/url"
	"testing"
)

func TestWatchQuery(t *testing.T) {
	for _, tc := range []struct {
		name, query string
		spread      float64
		want        string
		changed     bool
	}{
		{"a reflector's 5-10 min watch asks for 30 min at the least spread", "watch=true&timeoutSeconds=412", 0, "1800", true},
		{"and for up to an hour at the most", "watch=true&timeoutSeconds=412", 0.999, "3598", true},
		{"a watch that names no timeout gets one", "watch=1", 0.5, "2700", true},
		{"a watch that asks for longer keeps it", "watch=true&timeoutSeconds=7200", 0, "7200", false},
		{"a list keeps its query", "timeoutSeconds=30", 0, "30", false},
		{"a watch=false list too", "watch=false&timeoutSeconds=30", 0, "30", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			got, changed := watchQuery(q, tc.spread)
			if got.Get("timeoutSeconds") != tc.want || changed != tc.changed {
				t.Fatalf("watchQuery(%s, %v) = timeoutSeconds %q, changed %v; want %q, %v", tc.query, tc.spread, got.Get("timeoutSeconds"), changed, tc.want, tc.changed)
			}
		})
	}
}
