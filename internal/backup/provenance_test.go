package backup_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/internal/backup"
)

// planted is the name of the attack: a far-future time in the
// executor's old form, which anyone who may write to the prefix can choose.
const planted = pfx + "99991231T000000Z-xxxxxxxx.snap"

// TestOnlyNamesSignedWithTheClustersKeyAreProven: a name is proven only
// with the tag the cluster's key made for its namespace, cluster, time and
// id; a planted or copied name, another key's, another cluster's, or one
// of an earlier release (no tag) is not.
func TestOnlyNamesSignedWithTheClustersKeyAreProven(t *testing.T) {
	now := at("2025-06-01T12:00:00Z")
	real := prover.SignedObjectKey(pfx, now, "0a1b2c3d")
	tag := strings.TrimSuffix(real[strings.LastIndex(real, "-")+1:], ".snap")
	other := backup.NewProver(bytes.Repeat([]byte{7}, backup.ProvenanceKeyBytes), "ns", "bao")
	for _, tc := range []struct {
		name, key string
		proven    bool
	}{
		{"the executor's own name", real, true},
		{"the same name copied to another bucket or path prefix", "q/ns/bao/" + strings.TrimPrefix(real, pfx), false},
		{"a planted far-future name without a tag", planted, false},
		{"a far-future name carrying a real name's tag", pfx + "99991231T000000Z-0a1b2c3d-" + tag + ".snap", false},
		{"a real name's tag on another id", pfx + now.Format("20060102T150405Z") + "-ffffffff-" + tag + ".snap", false},
		{"a name signed with another key", other.SignedObjectKey(pfx, now, "0a1b2c3d"), false},
		{"a name signed for another cluster", prover.ForCluster("bao-2").SignedObjectKey(pfx, now, "0a1b2c3d"), false},
		{"a name of an earlier release (no tag)", backup.ObjectKey(pfx, now, "0a1b2c3d"), false},
		{"a deeper path", prover.SignedObjectKey(pfx+"x/", now, "0a1b2c3d"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := prover.Prove(pfx, tc.key); ok != tc.proven {
				t.Errorf("Prove(%s) = %v, want %v", tc.key, ok, tc.proven)
			}
		})
	}
	// Bound to the cluster, not the prefix: the same name under another
	// prefix proves with that prefix.
	moved := prover.SignedObjectKey("q/ns/bao/", now, "0a1b2c3d")
	if _, ok := prover.Prove("q/ns/bao/", moved); !ok {
		t.Errorf("a name under another pathPrefix is not proven")
	}
	if _, ok := (backup.Prover{}).Prove(pfx, real); ok {
		t.Errorf("a prover without a key proves a name")
	}
}

// TestAPlantedFarFutureNameNeverDisplacesRealSnapshots is the issue's
// attack on retention: 99991231T000000Z-xxxxxxxx.snap and a copy carrying a
// real name's tag are ignored and reported, never counted among maxCount,
// never deleted; the real snapshots are kept as if they were not there.
func TestAPlantedFarFutureNameNeverDisplacesRealSnapshots(t *testing.T) {
	now := at("2025-06-01T12:00:00Z")
	all := snaps(0, 1, 2, 3)
	tag := strings.TrimSuffix(all[1][strings.LastIndex(all[1], "-")+1:], ".snap")
	forged := pfx + "99991231T000000Z-00000001-" + tag + ".snap"
	keys := append([]string{planted, forged}, all...)
	expired, ignored := backup.Retention{MaxCount: 3}.Expired(prover, pfx, keys, all[0], now)
	if want := []string{all[3]}; !reflect.DeepEqual(expired, want) {
		t.Errorf("expired %v, want %v: the planted names took places among maxCount or were deleted", expired, want)
	}
	if ignored == nil || ignored.Count != 2 || ignored.Example != forged { // the first by key
		t.Errorf("ignored %+v, want 2 with the example %s", ignored, forged)
	}
	if msg := ignored.Message(); !strings.Contains(msg, "ignored 2 object(s)") || !strings.Contains(msg, forged) {
		t.Errorf("message %q names neither the count nor the example", msg)
	}
}

// FuzzRetentionNeverDeletesWhatItCannotProve: whatever the listing (real
// names, planted ones in the executor's form, foreign files, any time),
// retention deletes only proven names of this cluster, never keep, and
// keeps exactly what it would keep were the unproven objects absent.
func FuzzRetentionNeverDeletesWhatItCannotProve(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 200, 201}, uint8(2), uint16(0))
	f.Add([]byte{250, 0, 251, 3, 9}, uint8(1), uint16(30))
	f.Fuzz(func(t *testing.T, plan []byte, maxCount uint8, maxAgeHours uint16) {
		now := at("2025-06-01T12:00:00Z")
		var keys, real []string
		for i, b := range plan {
			id := strings.Repeat(string("0123456789abcdef"[i%16]), 8)
			taken := now.Add(-time.Duration(b%100) * time.Hour)
			switch {
			case b < 150:
				k := prover.SignedObjectKey(pfx, taken, id)
				keys, real = append(keys, k), append(real, k)
			case b < 200:
				keys = append(keys, backup.ObjectKey(pfx, now.Add(time.Duration(b)*24*time.Hour), id)) // planted, no tag
			case b < 230:
				k := prover.SignedObjectKey(pfx, taken, id) // a real tag on another time
				keys = append(keys, pfx+"99991231T000000Z"+strings.TrimPrefix(k, pfx)[16:])
			default:
				keys = append(keys, pfx+"readme-"+id)
			}
		}
		keep := ""
		if len(real) > 0 {
			keep = real[0]
		}
		policy := backup.Retention{MaxCount: int(maxCount % 8), MaxAge: time.Duration(maxAgeHours%200) * time.Hour}
		got, _ := policy.Expired(prover, pfx, keys, keep, now)
		isReal := map[string]bool{}
		for _, k := range real {
			isReal[k] = true
		}
		for _, k := range got {
			if !isReal[k] || k == keep {
				t.Fatalf("deleted %s, which is unproven or the one just written", k)
			}
		}
		alone, _ := policy.Expired(prover, pfx, real, keep, now)
		if !reflect.DeepEqual(got, alone) {
			t.Fatalf("planted objects changed what expires: %v, without them %v", got, alone)
		}
	})
}
