package nscache

import (
	"slices"
	"testing"
)

func TestNormalize(t *testing.T) {
	tests := map[string]struct {
		in, want []string
	}{
		"nothing named serves nothing":                {nil, []string{}},
		"names come back sorted":                      {[]string{"b", "a"}, []string{"a", "b"}},
		"a name given twice is served once":           {[]string{"a", "b", "a"}, []string{"a", "b"}},
		"the empty name (every namespace) is dropped": {[]string{"", "a"}, []string{"a"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := normalize(tt.in); !slices.Equal(got, tt.want) {
				t.Fatalf("normalize(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
