package backup_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/openbao/operator/internal/backup"
)

const pfx = "p/ns/bao/"

// prover is ns/bao's, with a fixed test key.
var prover = backup.NewProver([]byte("0123456789abcdef0123456789abcdef"), "ns", "bao")

// snaps names snapshots of ns/bao taken the given hours before noon, as
// its executor signs them.
func snaps(hoursAgo ...int) []string {
	var out []string
	for i, h := range hoursAgo {
		out = append(out, prover.SignedObjectKey(pfx, at("2025-06-01T12:00:00Z").Add(-time.Duration(h)*time.Hour), "0000000"+string(rune('0'+i))))
	}
	return out
}

func TestRetentionExpired(t *testing.T) {
	now := at("2025-06-01T12:00:00Z")
	all := snaps(0, 1, 2, 30, 50, 100) // newest first
	foreign := []string{"p/ns/bao-2/20200101T000000Z-00000000.snap", "p/ns/bao/sub/20200101T000000Z-00000000.snap", "p/ns/bao/readme"}
	cases := []struct {
		name   string
		policy backup.Retention
		keys   []string
		keep   string
		want   []string
	}{
		{"no policy deletes nothing", backup.Retention{}, all, all[0], nil},
		{"maxCount keeps the newest, deletes oldest first", backup.Retention{MaxCount: 3}, all, all[0], []string{all[5], all[4], all[3]}},
		{"maxAge deletes what is older", backup.Retention{MaxAge: 24 * time.Hour}, all, all[0], []string{all[5], all[4], all[3]}},
		{"both: the stricter wins for each", backup.Retention{MaxCount: 5, MaxAge: 40 * time.Hour}, all, all[0], []string{all[5], all[4]}},
		{"maxCount 1 keeps only the one just written", backup.Retention{MaxCount: 1}, all, all[0], []string{all[5], all[4], all[3], all[2], all[1]}},
		{"the one just written survives even when old", backup.Retention{MaxAge: time.Hour}, all, all[5], []string{all[4], all[3], all[2]}},
		{"the one just written survives when not the newest", backup.Retention{MaxCount: 1}, all, all[2], []string{all[5], all[4], all[3], all[1]}},
		{"other clusters and foreign files are never touched", backup.Retention{MaxCount: 1}, append(foreign, all[0]), all[0], nil},
		{"listing order does not matter", backup.Retention{MaxCount: 2}, []string{all[3], all[0], all[5], all[1]}, all[0], []string{all[5], all[3]}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := tc.policy.Expired(prover, pfx, tc.keys, tc.keep, now)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Expired = %v\nwant      %v", got, tc.want)
			}
		})
	}
}

// TestWhoRetains: the operator deletes only with credentials the spec
// names; without them only the backup Job, under the cluster's own
// identity, may reach the store.
func TestWhoRetains(t *testing.T) {
	for _, c := range []struct {
		name string
		in   backup.RetentionObserved
		want backup.RetentionActor
	}{
		{"a cluster without retention deletes nothing", backup.RetentionObserved{}, backup.RetentionNone},
		{"a cluster without retention deletes nothing, credentials or not",
			backup.RetentionObserved{ExplicitCredentials: true}, backup.RetentionNone},
		{"a count with credentials is applied by the operator with those credentials",
			backup.RetentionObserved{Policy: backup.Retention{MaxCount: 3}, ExplicitCredentials: true}, backup.RetentionByOperator},
		{"an age with credentials is applied by the operator with those credentials",
			backup.RetentionObserved{Policy: backup.Retention{MaxAge: time.Hour}, ExplicitCredentials: true}, backup.RetentionByOperator},
		{"a count without credentials is applied by the executor under the cluster's identity",
			backup.RetentionObserved{Policy: backup.Retention{MaxCount: 3}}, backup.RetentionByExecutor},
		{"an age without credentials is applied by the executor under the cluster's identity",
			backup.RetentionObserved{Policy: backup.Retention{MaxAge: time.Hour}}, backup.RetentionByExecutor},
		{"both bounds without credentials are applied by the executor",
			backup.RetentionObserved{Policy: backup.Retention{MaxCount: 3, MaxAge: time.Hour}}, backup.RetentionByExecutor},
	} {
		if got := backup.WhoRetains(c.in); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// TestTheOperatorNeverRetainsWithoutCredentials is WhoRetains's invariant
// over every policy shape: no credentials, never the operator.
func TestTheOperatorNeverRetainsWithoutCredentials(t *testing.T) {
	for _, count := range []int{-1, 0, 1, 10000} {
		for _, age := range []time.Duration{-time.Hour, 0, time.Minute} {
			policy := backup.Retention{MaxCount: count, MaxAge: age}
			if got := backup.WhoRetains(backup.RetentionObserved{Policy: policy}); got == backup.RetentionByOperator {
				t.Errorf("%+v without credentials: the operator", policy)
			}
			if got := backup.WhoRetains(backup.RetentionObserved{Policy: policy, ExplicitCredentials: true}); policy.IsZero() != (got == backup.RetentionNone) {
				t.Errorf("%+v: %s", policy, got)
			}
		}
	}
}

// FuzzWhoRetains checks WhoRetains's invariant over any policy: the
// operator applies retention only with credentials the spec names, and
// someone applies it exactly when the policy bounds anything.
func FuzzWhoRetains(f *testing.F) {
	f.Add(3, int64(0), false)
	f.Add(0, int64(time.Hour), true)
	f.Add(0, int64(0), true)
	f.Add(-1, int64(-1), false)
	f.Fuzz(func(t *testing.T, count int, age int64, explicit bool) {
		in := backup.RetentionObserved{Policy: backup.Retention{MaxCount: count, MaxAge: time.Duration(age)}, ExplicitCredentials: explicit}
		got := backup.WhoRetains(in)
		if got == backup.RetentionByOperator && !explicit {
			t.Fatalf("%+v: the operator would reach the store without credentials of its own", in)
		}
		if (got == backup.RetentionNone) != in.Policy.IsZero() {
			t.Fatalf("%+v: %s", in, got)
		}
	})
}
