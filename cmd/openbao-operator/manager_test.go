package main

import (
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
