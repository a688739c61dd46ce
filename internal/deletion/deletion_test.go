package deletion_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/deletion"
)

var (
	created = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	before  = created.Add(-time.Hour)
	after   = created.Add(time.Minute)
)

func TestVolumes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		o       deletion.Observed
		deleted []string
		keptWhy string
	}{
		{"Retain deletes no volume",
			deletion.Observed{Policy: v1alpha1.DeletionPolicyRetain, StatefulSet: "bao", ClusterCreated: created,
				Claims: []deletion.Claim{{"data-bao-0", after}}}, nil, "keeps the volumes"},
		{"DeletePVCs deletes the volumes the cluster's StatefulSet made",
			deletion.Observed{Policy: v1alpha1.DeletionPolicyDeletePVCs, StatefulSet: "bao", ClusterCreated: created,
				Claims: []deletion.Claim{{"data-bao-1", after}, {"data-bao-0", after}}}, []string{"data-bao-0", "data-bao-1"}, ""},
		{"a StatefulSet of the cluster's name that is another's keeps every claim",
			deletion.Observed{Policy: v1alpha1.DeletionPolicyDeleteAll, StatefulSet: "bao", ForeignStatefulSet: true,
				ClusterCreated: created, Initialized: true, Claims: []deletion.Claim{{"data-bao-0", after}}},
			nil, "StatefulSet bao is not this cluster's"},
		{"a claim with the labels but another name is kept",
			deletion.Observed{Policy: v1alpha1.DeletionPolicyDeleteAll, StatefulSet: "bao", ClusterCreated: created,
				Claims: []deletion.Claim{{"audit-bao-0", after}, {"data-bao-00", after}, {"data-bao-x", after}}},
			nil, "is not one StatefulSet bao gives"},
		{"a claim older than a cluster that never adopted it is kept",
			deletion.Observed{Policy: v1alpha1.DeletionPolicyDeleteAll, StatefulSet: "bao", ClusterCreated: created,
				Claims: []deletion.Claim{{"data-bao-0", before}, {"data-bao-1", after}}}, []string{"data-bao-1"}, "never adopted"},
		{"a claim older than a cluster that adopted its data goes with it",
			deletion.Observed{Policy: v1alpha1.DeletionPolicyDeletePVCs, StatefulSet: "bao", ClusterCreated: created, Initialized: true,
				Claims: []deletion.Claim{{"data-bao-0", before}}}, []string{"data-bao-0"}, ""},
		{"a claim created in the cluster's creation second counts as the cluster's",
			deletion.Observed{Policy: v1alpha1.DeletionPolicyDeletePVCs, StatefulSet: "bao", ClusterCreated: created.Add(400 * time.Millisecond),
				Claims: []deletion.Claim{{"data-bao-0", created}}}, []string{"data-bao-0"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := deletion.Volumes(tc.o)
			if !slices.Equal(d.Delete, tc.deleted) {
				t.Errorf("deleted %v, want %v", d.Delete, tc.deleted)
			}
			if len(d.Delete)+len(d.Keep) != len(tc.o.Claims) {
				t.Errorf("%d deleted + %d kept of %d claims", len(d.Delete), len(d.Keep), len(tc.o.Claims))
			}
			for _, k := range d.Keep {
				if tc.keptWhy == "" || !strings.Contains(k.Why, tc.keptWhy) {
					t.Errorf("kept %s because %q, want a reason with %q", k.Name, k.Why, tc.keptWhy)
				}
			}
		})
	}
}

func TestIsDataVolume(t *testing.T) {
	for name, want := range map[string]bool{
		"data-bao-0": true, "data-bao-10": true, "data-bao-": false, "data-bao-01": false, "data-bao--1": false,
		"data-bao-1x": false, "data-bao-internal-0": false, "data-ba-0": false, "audit-bao-0": false, "data-bao-99999999999": false,
	} {
		if got := deletion.IsDataVolume("bao", name); got != want {
			t.Errorf("IsDataVolume(bao, %q) = %v, want %v", name, got, want)
		}
	}
}

// FuzzVolumesDeletesOnlyTheClustersOwn: whatever is observed, no claim is
// deleted unless the policy deletes volumes, no StatefulSet of another
// holds the name, the name is data-<sts>-<ordinal>, and the claim is not
// older than a cluster that never adopted data; every claim is either
// deleted or kept, once.
func FuzzVolumesDeletesOnlyTheClustersOwn(f *testing.F) {
	f.Add(uint8(2), "bao", false, false, int64(0), "data-bao-0", int64(60), "data-bao-1", int64(-3600))
	f.Add(uint8(1), "bao", true, true, int64(1), "data-bao-0", int64(60), "data-x-0", int64(0))
	f.Fuzz(func(t *testing.T, policy uint8, sts string, foreign, initialized bool, clusterOffset int64,
		name1 string, offset1 int64, name2 string, offset2 int64) {
		if name1 == name2 {
			t.Skip("claim names are unique in a namespace")
		}
		o := deletion.Observed{
			Policy:      []v1alpha1.DeletionPolicy{v1alpha1.DeletionPolicyRetain, v1alpha1.DeletionPolicyDeletePVCs, v1alpha1.DeletionPolicyDeleteAll, ""}[policy%4],
			StatefulSet: sts, ForeignStatefulSet: foreign, Initialized: initialized,
			ClusterCreated: created.Add(time.Duration(clusterOffset) * time.Millisecond),
			Claims: []deletion.Claim{{name1, created.Add(time.Duration(offset1) * time.Second)},
				{name2, created.Add(time.Duration(offset2) * time.Second)}},
		}
		d := deletion.Volumes(o)
		seen := map[string]int{}
		for _, k := range d.Keep {
			seen[k.Name]++
			if k.Why == "" {
				t.Fatalf("%s kept without a reason", k.Name)
			}
		}
		for _, name := range d.Delete {
			seen[name]++
			var claim deletion.Claim
			for _, c := range o.Claims {
				if c.Name == name {
					claim = c
				}
			}
			switch {
			case !o.Policy.DeletesVolumes():
				t.Fatalf("%s deleted under %q", name, o.Policy)
			case o.ForeignStatefulSet:
				t.Fatalf("%s deleted beside another's StatefulSet %s", name, sts)
			case !strings.HasPrefix(name, "data-"+sts+"-") || !deletion.IsDataVolume(sts, name):
				t.Fatalf("%s deleted: not a volume of StatefulSet %s", name, sts)
			case !o.Initialized && claim.Created.Before(o.ClusterCreated.Truncate(time.Second)):
				t.Fatalf("%s (created %v) deleted by a cluster created %v that never adopted it", name, claim.Created, o.ClusterCreated)
			}
		}
		for _, c := range o.Claims {
			if n := seen[c.Name]; n < 1 {
				t.Fatalf("%s neither deleted nor kept: %s", c.Name, fmt.Sprint(d))
			}
		}
	})
}
