package main

import (
	"errors"
	"io/fs"
	"testing"
)

func TestSoftMemoryLimit(t *testing.T) {
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(path string) ([]byte, error) {
			if v, ok := m[path]; ok {
				return []byte(v), nil
			}
			return nil, fs.ErrNotExist
		}
	}
	tests := map[string]struct {
		gomemlimit     string
		files          map[string]string
		want, wantFrom int64
		wantOK         bool
	}{
		"a cgroup v2 limit leaves a tenth for what the runtime does not count": {
			files: map[string]string{cgroupV2MemoryMax: "268435456\n"}, want: 241591911, wantFrom: 268435456, wantOK: true},
		"a cgroup v1 limit counts the same": {
			files: map[string]string{cgroupV1MemoryMax: "536870912\n"}, want: 483183821, wantFrom: 536870912, wantOK: true},
		"v2 says there is no limit":         {files: map[string]string{cgroupV2MemoryMax: "max\n", cgroupV1MemoryMax: "536870912"}},
		"v1 says there is no limit":         {files: map[string]string{cgroupV1MemoryMax: "9223372036854771712\n"}},
		"no cgroup file: no limit":          {files: map[string]string{}},
		"a file that is not a number: none": {files: map[string]string{cgroupV2MemoryMax: "lots"}},
		"GOMEMLIMIT set: the runtime's own": {gomemlimit: "200MiB", files: map[string]string{cgroupV2MemoryMax: "268435456"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, from, ok := softMemoryLimit(tt.gomemlimit, files(tt.files))
			if got != tt.want || from != tt.wantFrom || ok != tt.wantOK {
				t.Fatalf("softMemoryLimit = %d of %d, %v; want %d of %d, %v", got, from, ok, tt.want, tt.wantFrom, tt.wantOK)
			}
		})
	}
	if _, _, ok := softMemoryLimit("", func(string) ([]byte, error) { return nil, errors.New("denied") }); ok {
		t.Fatal("an unreadable cgroup set a limit")
	}
}
