package backup_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/internal/backup"
)

func TestTheCanaryNamesItsBackupItsSnapshotAndAnRFC3339NanoUTCTime(t *testing.T) {
	at := time.Date(2026, 11, 23, 23, 5, 1, 123456789, time.FixedZone("CET", 3600))
	data, stamp := backup.CanaryValue("bao-20261123-220500", "p/ns/bao/k", at)
	if stamp != "2026-11-23T22:05:01.123456789Z" {
		t.Errorf("writtenAt %q", stamp)
	}
	if data["backup"] != "bao-20261123-220500" || data["writtenAt"] != stamp || data["key"] != "p/ns/bao/k" || len(data) != 3 {
		t.Errorf("canary %v", data)
	}
	if c := backup.CanaryOf(data); c != (backup.Canary{Backup: "bao-20261123-220500", WrittenAt: stamp, Key: "p/ns/bao/k"}) {
		t.Errorf("read back as %+v", c)
	}
	if err := backup.CanaryMatches(data, "bao-20261123-220500", stamp); err != nil {
		t.Errorf("the canary does not match itself: %v", err)
	}
}

func TestCanaryMatchesSaysWhatDiffers(t *testing.T) {
	const name, at = "b1", "2026-11-23T22:05:01.123456789Z"
	for _, tc := range []struct {
		what      string
		read      map[string]any
		name, at  string
		wantInErr string
	}{
		{"another backup's canary", map[string]any{"backup": "b0", "writtenAt": at}, name, at, `backup is "b0", want "b1"`},
		{"an older canary of the same name", map[string]any{"backup": name, "writtenAt": "2026-11-22T22:05:01Z"}, name, at,
			`writtenAt is "2026-11-22T22:05:01Z", want "` + at + `"`},
		{"no canary fields", map[string]any{}, name, at, "has no backup"},
		{"a time that is not a string", map[string]any{"backup": name, "writtenAt": 5}, name, at, "has no writtenAt"},
		{"a backup that recorded none", map[string]any{"backup": name, "writtenAt": at}, name, "", "recorded no canary"},
	} {
		err := backup.CanaryMatches(tc.read, tc.name, tc.at)
		if !errors.Is(err, backup.ErrCanaryMismatch) || !strings.Contains(err.Error(), tc.wantInErr) {
			t.Errorf("%s: %v, want an ErrCanaryMismatch saying %q", tc.what, err, tc.wantInErr)
		}
	}
}
