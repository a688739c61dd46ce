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

func TestDiff(t *testing.T) {
	served := func(names ...string) map[string]*member {
		m := map[string]*member{}
		for _, n := range names {
			m[n] = &member{ns: n}
		}
		return m
	}
	tests := map[string]struct {
		served           map[string]*member
		want             []string
		wantAdd, wantRem []string
	}{
		"from nothing every name starts":                  {served(), []string{"a", "b"}, []string{"a", "b"}, nil},
		"to nothing every namespace stops":                {served("b", "a"), []string{}, nil, []string{"a", "b"}},
		"the same set changes nothing":                    {served("a", "b"), []string{"a", "b"}, nil, nil},
		"a kept namespace is neither started nor stopped": {served("a", "b"), []string{"b", "c"}, []string{"c"}, []string{"a"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			add, rem := diff(tt.served, tt.want)
			if !slices.Equal(add, tt.wantAdd) || !slices.Equal(rem, tt.wantRem) {
				t.Fatalf("diff = add %q remove %q, want add %q remove %q", add, rem, tt.wantAdd, tt.wantRem)
			}
		})
	}
}
