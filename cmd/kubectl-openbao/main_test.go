package main

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// TestFlagsMayFollowTheCommandAndCluster: kubectl users type flags after
// the arguments (`kubectl openbao status bao -n prod`).
func TestFlagsMayFollowTheCommandAndCluster(t *testing.T) {
	for _, args := range [][]string{
		{"status", "bao", "-n", "prod"},
		{"-n", "prod", "status", "bao"},
		{"status", "-n", "prod", "bao"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		ns := fs.String("n", "", "")
		got, err := parseInterleaved(fs, args)
		if err != nil || strings.Join(got, " ") != "status bao" || *ns != "prod" {
			t.Errorf("%v: positional %v, namespace %q, err %v", args, got, *ns, err)
		}
	}
}
