package volumes_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/openbao/operator/internal/volumes"
)

var (
	created    = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	expandable = volumes.Class{Name: "fast", Found: true, AllowsExpansion: true}
)

func q(s string) resource.Quantity { return resource.MustParse(s) }

func claim(name, requested, capacity string) volumes.Claim {
	return volumes.Claim{Name: name, Created: created.Add(time.Minute), Requested: q(requested), Capacity: q(capacity)}
}

func observed(want string, claims ...volumes.Claim) volumes.Observed {
	return volumes.Observed{Want: q(want), Class: expandable, StatefulSet: "bao", ClusterCreated: created, Initialized: true, Claims: claims}
}

func TestTheStorageStepGrowsOnlyTheClustersClaimsAndNeverShrinksOne(t *testing.T) {
	tests := map[string]struct {
		o                       volumes.Observed
		grow, resizing, restart []string
		refused                 string
	}{
		"claims at the size are left alone": {o: observed("10Gi", claim("data-bao-0", "10Gi", "10Gi")), grow: nil},
		"a larger size grows every claim of the cluster": {o: observed("20Gi", claim("data-bao-1", "10Gi", "10Gi"), claim("data-bao-0", "10Gi", "10Gi")),
			grow: []string{"data-bao-0", "data-bao-1"}, resizing: []string{"data-bao-0", "data-bao-1"}},
		"the same size in other units is no change":            {o: observed("10240Mi", claim("data-bao-0", "10Gi", "10Gi"))},
		"a claim of another StatefulSet's name is not touched": {o: observed("20Gi", claim("data-bao-other-0", "10Gi", "10Gi"), claim("data-baox-0", "1Gi", "1Gi"))},
		"no claim is touched while a StatefulSet of the name is not the cluster's": {o: func() volumes.Observed {
			o := observed("20Gi", claim("data-bao-0", "10Gi", "10Gi"))
			o.ForeignStatefulSet = true
			return o
		}()},
		"a claim older than a cluster that never adopted it is not touched": {o: func() volumes.Observed {
			o := observed("20Gi", volumes.Claim{Name: "data-bao-0", Created: created.Add(-time.Hour), Requested: q("10Gi")})
			o.Initialized = false
			return o
		}()},
		"a smaller size shrinks nothing and says why": {o: observed("5Gi", claim("data-bao-0", "10Gi", "10Gi")), refused: "may not decrease"},
		"a class without expansion grows nothing and says why": {o: func() volumes.Observed {
			o := observed("20Gi", claim("data-bao-0", "10Gi", "10Gi"))
			o.Class.AllowsExpansion = false
			return o
		}(), refused: `"fast" has no allowVolumeExpansion`},
		"a missing class grows nothing": {o: func() volumes.Observed {
			o := observed("20Gi", claim("data-bao-0", "10Gi", "10Gi"))
			o.Class = volumes.Class{Name: "gone"}
			return o
		}(), refused: "is not found"},
		"a larger size grows the read replicas' claims by the same rule": {o: func() volumes.Observed {
			o := observed("20Gi", claim("data-bao-read-1", "10Gi", "10Gi"), claim("data-bao-0", "10Gi", "10Gi"), claim("data-bao-read-x", "10Gi", "10Gi"))
			o.ReadStatefulSet = "bao-read"
			return o
		}(), grow: []string{"data-bao-0", "data-bao-read-1"}, resizing: []string{"data-bao-0", "data-bao-read-1"}},
		"a read replica's claim is not the cluster's without its read StatefulSet": {
			o: observed("20Gi", claim("data-bao-read-0", "10Gi", "10Gi"))},
		"a read replica's claim is not shrunk either": {o: func() volumes.Observed {
			o := observed("5Gi", claim("data-bao-read-0", "10Gi", "10Gi"))
			o.ReadStatefulSet = "bao-read"
			return o
		}(), refused: "may not decrease"},
		"a grown claim whose file system waits for a restart is reported": {o: func() volumes.Observed {
			c := claim("data-bao-0", "20Gi", "20Gi")
			c.FileSystemResizePending = true
			return observed("20Gi", c, claim("data-bao-1", "20Gi", "10Gi"))
		}(), restart: []string{"data-bao-0"}, resizing: []string{"data-bao-1"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := volumes.Decide(tc.o)
			if !slices.Equal(d.Grow, tc.grow) || !slices.Equal(d.Resizing, tc.resizing) || !slices.Equal(d.RestartPending, tc.restart) {
				t.Errorf("grow %v resizing %v restart %v, want %v %v %v", d.Grow, d.Resizing, d.RestartPending, tc.grow, tc.resizing, tc.restart)
			}
			if (tc.refused == "") != (d.Refused == "") || !strings.Contains(d.Refused, tc.refused) {
				t.Errorf("refused %q, want one saying %q", d.Refused, tc.refused)
			}
		})
	}
}

func TestTheRefusalNamesTheFieldAndTheReason(t *testing.T) {
	if got := volumes.Refusal(q("10Gi"), q("5Gi"), expandable); !strings.Contains(got, "storage.size may not decrease (from 10Gi to 5Gi)") {
		t.Errorf("decrease: %q", got)
	}
	if got := volumes.Refusal(q("10Gi"), q("20Gi"), volumes.Class{Found: true}); !strings.Contains(got, "the default, none marked") && !strings.Contains(got, "allowVolumeExpansion") {
		t.Errorf("no expansion: %q", got)
	}
	if got := volumes.Refusal(q("10Gi"), q("20Gi"), expandable); got != "" {
		t.Errorf("an expandable class: %q", got)
	}
}

// FuzzAClaimIsGrownOnlyIfItIsTheClustersAndSmaller: whatever the claims,
// sizes and class, a claim is patched only when it is provably the
// cluster's (its StatefulSet's name, not foreign, not an unadopted older
// claim), its request is below spec.storage.size (never a shrink), and
// the class allows expansion; a claim listed twice is decided alike.
func FuzzAClaimIsGrownOnlyIfItIsTheClustersAndSmaller(f *testing.F) {
	f.Add("data-bao-0", int64(10), int64(20), true, true, false, true, int64(60))
	f.Add("data-bao-00", int64(10), int64(20), true, true, false, true, int64(60))
	f.Add("data-bao-1", int64(30), int64(20), true, true, false, false, int64(-60))
	f.Fuzz(func(t *testing.T, name string, requestedGi, wantGi int64, found, expands, foreign, initialized bool, ageSeconds int64) {
		c := volumes.Claim{Name: name, Created: created.Add(time.Duration(ageSeconds) * time.Second),
			Requested: *resource.NewQuantity(requestedGi<<30, resource.BinarySI)}
		o := volumes.Observed{Want: *resource.NewQuantity(wantGi<<30, resource.BinarySI), Class: volumes.Class{Name: "c", Found: found, AllowsExpansion: expands},
			StatefulSet: "bao", ForeignStatefulSet: foreign, ClusterCreated: created, Initialized: initialized, Claims: []volumes.Claim{c, c}}
		d := volumes.Decide(o)
		if len(d.Grow) == 0 {
			return
		}
		if len(d.Grow) != 2 || d.Grow[0] != name { // the same claim twice in the input: decided the same each time
			t.Fatalf("grow %v of %q", d.Grow, name)
		}
		ordinal, isData := strings.CutPrefix(name, "data-bao-")
		if !isData || ordinal == "" || (len(ordinal) > 1 && ordinal[0] == '0') || strings.Trim(ordinal, "0123456789") != "" {
			t.Errorf("grew %q, not a claim of StatefulSet bao", name)
		}
		if foreign || (!initialized && c.Created.Before(created)) {
			t.Errorf("grew %q: foreign %v, initialized %v, created %v before the cluster", name, foreign, initialized, c.Created)
		}
		if c.Requested.Cmp(o.Want) >= 0 {
			t.Errorf("grew %q from %s to %s: not larger", name, c.Requested.String(), o.Want.String())
		}
		if !found || !expands {
			t.Errorf("grew %q where the class does not allow it", name)
		}
	})
}
