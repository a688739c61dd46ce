package backup_test

import (
	"bytes"
	"testing"

	"github.com/openbao/operator/internal/backup"
)

func TestObjectNames(t *testing.T) {
	cases := map[string]string{
		backup.ObjectPrefix("", "ns", "bao"):                                       "ns/bao/",
		backup.ObjectPrefix("backups", "ns", "bao"):                                "backups/ns/bao/",
		backup.ObjectPrefix("/a/b/", "ns", "bao"):                                  "a/b/ns/bao/",
		backup.ObjectKey("a/ns/bao/", at("2025-03-04T05:06:07+02:00"), "0a1b2c3d"): "a/ns/bao/20250304T030607Z-0a1b2c3d.snap",
	}
	for got, want := range cases {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	id, err := backup.NewObjectID(bytes.NewReader([]byte{0xde, 0xad, 0xbe, 0xef}))
	if err != nil || id != "deadbeef" {
		t.Errorf("NewObjectID = %q, %v", id, err)
	}
}

func TestParseObjectKeyReadsOnlyThisClustersSnapshots(t *testing.T) {
	prefix := backup.ObjectPrefix("p", "ns", "bao")
	key := backup.ObjectKey(prefix, at("2025-03-04T05:06:07Z"), "0a1b2c3d")
	if got, ok := backup.ParseObjectKey(prefix, key); !ok || !got.Equal(at("2025-03-04T05:06:07Z")) {
		t.Errorf("ParseObjectKey(%q) = %v, %v", key, got, ok)
	}
	for _, other := range []string{
		"p/ns/bao-2/20250304T050607Z-0a1b2c3d.snap",       // a cluster whose name starts with bao
		"p/ns/bao/x/ns/c/20250304T050607Z-0a1b2c3d.snap",  // another cluster under a deeper pathPrefix
		"p/ns/bao/20250304T050607Z-0a1b2c3d.snap.partial", // not a snapshot name
		"p/ns/bao/notes.txt",
		"p/ns/bao/20251304T050607Z-0a1b2c3d.snap", // month 13
		"p/ns/bao/20250304T050607Z-0A1B2C3D.snap",
		"q/ns/bao/20250304T050607Z-0a1b2c3d.snap",
	} {
		if _, ok := backup.ParseObjectKey(prefix, other); ok {
			t.Errorf("%q read as a snapshot of ns/bao", other)
		}
	}
}
