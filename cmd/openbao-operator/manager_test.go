package main

import (
	"strings"
	"testing"

	"github.com/openbao/operator/controllers"
)

func TestMetricsAreServedOverAuthenticatedHTTPSUnlessToldOtherwise(t *testing.T) {
	for name, tc := range map[string]struct {
		args   []string
		secure bool
		addr   string
	}{
		"by default":             {nil, true, ":8443"},
		"--metrics-secure=false": {[]string{"--metrics-secure=false", "--metrics-bind-address=:8080"}, false, ":8080"},
	} {
		f, _, err := parseManagerFlags(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		m := controllers.ManagerOptions(f.managerSettings()).Metrics
		if m.SecureServing != tc.secure || (m.FilterProvider != nil) != tc.secure || m.BindAddress != tc.addr {
			t.Errorf("%s: secure serving %t, authentication filter %t, address %q; want %t, %t, %q",
				name, m.SecureServing, m.FilterProvider != nil, m.BindAddress, tc.secure, tc.secure, tc.addr)
		}
	}
}

// --watch-namespace (WATCH_NAMESPACE, as OLM sets it) limits the cache to
// its namespaces; empty serves all.
func TestWatchNamespaceLimitsTheCache(t *testing.T) {
	t.Setenv("WATCH_NAMESPACE", "")
	for name, tc := range map[string]struct {
		args []string
		want []string
	}{
		"all by default": {nil, nil},
		"a list":         {[]string{"--watch-namespace=team-a, team-b,"}, []string{"team-a", "team-b"}},
	} {
		f, _, err := parseManagerFlags(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		got := controllers.ManagerOptions(f.managerSettings()).Cache.DefaultNamespaces
		if len(got) != len(tc.want) {
			t.Errorf("%s: cache namespaces %v, want %v", name, got, tc.want)
		}
		for _, ns := range tc.want {
			if _, ok := got[ns]; !ok {
				t.Errorf("%s: cache namespaces %v lack %s", name, got, ns)
			}
		}
	}
}

func TestTenancyAndWatchNamespaceExcludeEachOther(t *testing.T) {
	err := runManager([]string{"--tenancy", "--watch-namespace=a"})
	if err == nil || !strings.Contains(err.Error(), "exclude each other") {
		t.Errorf("runManager(--tenancy --watch-namespace=a) = %v, want a refusal", err)
	}
}

// TestMaxConcurrentRolloutsDefaultsToOneAndRefusesZero: by default one
// cluster at a time rolls an operator-caused change; 0 would roll none.
func TestMaxConcurrentRolloutsDefaultsToOneAndRefusesZero(t *testing.T) {
	f, _, err := parseManagerFlags(nil)
	if err != nil || f.maxConcurrentRollouts != 1 {
		t.Fatalf("default: %d, %v; want 1", f.maxConcurrentRollouts, err)
	}
	if f, _, err = parseManagerFlags([]string{"--max-concurrent-rollouts=3"}); err != nil || f.maxConcurrentRollouts != 3 {
		t.Fatalf("--max-concurrent-rollouts=3: %d, %v", f.maxConcurrentRollouts, err)
	}
	if _, _, err = parseManagerFlags([]string{"--max-concurrent-rollouts=0"}); err == nil || !strings.Contains(err.Error(), "--max-concurrent-rollouts") {
		t.Fatalf("0: %v, want an error naming the flag", err)
	}
}
