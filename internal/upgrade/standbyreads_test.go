package upgrade

import (
	"strings"
	"testing"
)

func TestStandbyReadsAreRefusedBeforeTheReleaseThatServesThem(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version string
		on      bool
		refused bool
	}{
		{"off is always allowed", "2.4.0", false, false},
		{"2.4.0 refuses them", "2.4.0", true, true},
		{"a 2.4 rebuild refuses them", "2.4.9-abc", true, true},
		{"2.5.0 serves them", "2.5.0", true, false},
		{"a 2.5.0 pre-release counts as 2.5.0", "2.5.0-rc1", true, false},
		{"a later release serves them", "3.0.1", true, false},
		{"a version that is not one is refused", "latest", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := StandbyReadsRefused(tc.version, tc.on)
			if (msg != "") != tc.refused {
				t.Fatalf("StandbyReadsRefused(%q, %v) = %q, want refused %v", tc.version, tc.on, msg, tc.refused)
			}
			if tc.refused && (!strings.Contains(msg, "spec.readReplicas.standbyReads") || !strings.Contains(msg, "2.5.0")) {
				t.Fatalf("message %q names neither the field nor the version that supports it", msg)
			}
		})
	}
}
