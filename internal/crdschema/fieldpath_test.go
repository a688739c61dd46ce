package crdschema_test

import (
	"context"
	"testing"
)

// TestForbiddenKeyErrorsNameTheirPath: crdgen declares owned keys as
// properties with "not: {}". The schema validator, offline and in the API
// server alike, names such a key's path in the message and leaves Field
// empty:
//
//	<nil>: Invalid value: "": "spec.config.listener" must not validate the schema (not)
func TestForbiddenKeyErrorsNameTheirPath(t *testing.T) {
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
				return
			}
			t.Errorf("no error at %s: %v", tc.want, errs)
		})
	}
}
