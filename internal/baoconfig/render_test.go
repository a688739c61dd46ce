package baoconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestRenderRejectsInvalidInput(t *testing.T) {
	tests := map[string]struct {
		in       Input
		wantText string // the error names this
	}{
		"a protected user key is rejected by name": {
			testInput(user(map[string]any{"storage": map[string]any{"path": "/tmp"}})), `"storage"`,
		},
		"a seal alias cannot slip in as a user key": {
			testInput(user(map[string]any{"kms": map[string]any{}})), `"kms"`,
		},
		"disable_mlock belongs to the operator": {
			testInput(user(map[string]any{"disable_mlock": false})), `"disable_mlock"`,
		},
		"a user key that is no identifier is rejected by name": {
			testInput(user(map[string]any{"bad key\" {": "x"})), `"bad key\" {"`,
		},
		"an upper-case user key is rejected": {
			testInput(user(map[string]any{"Max_Lease_TTL": "1h"})), `"Max_Lease_TTL"`,
		},
		"null is rejected with its key path": {
			testInput(user(map[string]any{"audit": map[string]any{"options": nil}})), `"audit.options"`,
		},
		"a list of lists is rejected": {
			testInput(user(map[string]any{"x": []any{[]any{"a"}}})), `"x[0]"`,
		},
		"a list mixing objects and scalars is rejected": {
			testInput(user(map[string]any{"x": []any{"a", map[string]any{}}})), `"x"`,
		},
		"NaN is rejected": {
			testInput(user(map[string]any{"cache_size": math.NaN()})), `"cache_size"`,
		},
		"invalid UTF-8 is rejected": {
			testInput(user(map[string]any{"cluster_name": "\xff"})), `"cluster_name"`,
		},
		"a lease TTL OpenBao cannot parse is rejected with the forms it takes": {
			testInput(user(map[string]any{"default_lease_ttl": "1 hour"})), `"default_lease_ttl": "1 hour" is not a duration: want a whole number`,
		},
		"a boolean request duration is rejected": {
			testInput(user(map[string]any{"default_max_request_duration": true})), `"default_max_request_duration": a boolean`,
		},
		"a fractional max lease TTL is rejected": {
			testInput(user(map[string]any{"max_lease_ttl": json.Number("1.5")})), `"max_lease_ttl": 1.5 is not a duration`,
		},
		"an unsupported Go type is rejected": {
			testInput(user(map[string]any{"cache_size": uint8(1)})), `uint8`,
		},
		"a credential in KMS options is rejected": {
			testInput(kms(SealAWSKMS, map[string]string{"secret_key": "x"})), `AWS_SECRET_ACCESS_KEY`,
		},
		"an option the KMS seal does not read is rejected": {
			testInput(kms(SealGCPCKMS, map[string]string{"kms_key_id": "x"})), `"kms_key_id"`,
		},
		"an unknown seal type is rejected": {
			testInput(kms("shamir", nil)), `"shamir"`,
		},
		"the static seal needs a key id": {
			testInput(func(in *Input) { in.Seal.KeyID = "" }), "key id",
		},
		"TLS files need a key": {
			testInput(func(in *Input) { in.Listener.TLS.KeyFile = "" }), "key file",
		},
		"ACME needs domains": {
			testInput(acme, func(in *Input) { in.Listener.TLS.ACME.Domains = nil }), "domain",
		},
		"an internal listener by ACME is refused": {
			testInput(acme, func(in *Input) { in.Internal.TLS = in.Listener.TLS }), "internal listener",
		},
		"an internal listener on the API address is refused": {
			testInput(acme, func(in *Input) { in.Internal.Address = DefaultAddress }), "must differ",
		},
		"an internal listener sharing the cluster address is refused, as OpenBao would fail to bind it": {
			testInput(acme, func(in *Input) { in.Internal.ClusterAddress = DefaultClusterAddress }), "must differ",
		},
		"a metrics listener by ACME is refused": {
			testInput(acme, metrics, func(in *Input) { in.Metrics.TLS = in.Listener.TLS }), "metrics listener",
		},
		"a metrics listener on the API address is refused": {
			testInput(metrics, func(in *Input) { in.Metrics.Address = DefaultAddress }), "must differ",
		},
		"a metrics listener on the internal listener's address is refused": {
			testInput(acme, metrics, func(in *Input) { in.Metrics.Address = DefaultInternalAddress }), "must differ",
		},
		"a metrics listener sharing the internal cluster address is refused, as OpenBao would fail to bind it": {
			testInput(acme, metrics, func(in *Input) { in.Metrics.ClusterAddress = DefaultInternalClusterAddress }), "must differ",
		},
		"TLS 1.1 is refused": {
			testInput(func(in *Input) { in.Listener.TLS.MinVersion = "tls11" }), "tls11",
		},
		"bootstrap needs pod-0's address": {
			testInput(func(in *Input) { in.Raft.LeaderAPIAddr = "" }), "leader API address",
		},
		"auto_join needs a label selector": {
			testInput(initialized, func(in *Input) { in.Raft.AutoJoin.LabelSelector = "" }), "label selector",
		},
		"a reconcile interval shorter than the update interval is refused as OpenBao would": {
			testInput(timers(Timers{AutopilotReconcileInterval: 2 * time.Second, AutopilotUpdateInterval: 5 * time.Second})), "shorter",
		},
		"an unknown log level is refused": {
			testInput(func(in *Input) { in.LogLevel = "verbose" }), `"verbose"`,
		},
		"a non-voter cannot take part in the bootstrap": {
			testInput(func(in *Input) { in.Raft.NonVoter = true }), "non-voter",
		},
		"a performance multiplier above 10 is refused": {
			testInput(timers(Timers{PerformanceMultiplier: 11})), "11",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Render(tc.in)
			if err == nil {
				t.Fatal("Render succeeded, want an error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("error %q does not mention %s", err, tc.wantText)
			}
		})
	}
}

func TestDurationsOpenBaoReadsAreAccepted(t *testing.T) {
	for _, v := range []any{"768h", "30d", "3600", "90m", json.Number("3600"), int64(60), ""} {
		if err := ValidateUser(map[string]any{"max_lease_ttl": v, "default_lease_ttl": "60s"}); err != nil {
			t.Errorf("max_lease_ttl %#v: %v", v, err)
		}
	}
}

func TestLeaseTTLsAreCheckedAgainstEachOtherAsOpenBaoDoes(t *testing.T) {
	for _, tc := range []struct {
		user map[string]any
		ok   bool
	}{
		{map[string]any{}, true},
		{map[string]any{"max_lease_ttl": "768h"}, true},
		{map[string]any{"max_lease_ttl": "30d"}, false}, // OpenBao's default_lease_ttl is 32 days
		{map[string]any{"max_lease_ttl": "1h", "default_lease_ttl": "1h"}, true},
		{map[string]any{"max_lease_ttl": "1h", "default_lease_ttl": 3601}, false},
		{map[string]any{"max_lease_ttl": "0", "default_lease_ttl": "768h"}, true}, // zero is the default
		{map[string]any{"default_lease_ttl": "769h"}, false},
		{map[string]any{"max_lease_ttl": "8760h", "default_lease_ttl": "769h"}, true},
		{map[string]any{"max_lease_ttl": "a month"}, true}, // left to the duration check
	} {
		err := CheckLeaseTTLs(tc.user)
		if (err == nil) != tc.ok {
			t.Errorf("%v: error %v, want ok %v", tc.user, err, tc.ok)
		}
		if err != nil && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "cannot have DefaultLeaseTTL larger than MaxLeaseTTL")) {
			t.Errorf("%v: error %v does not say what OpenBao would", tc.user, err)
		}
	}
	if _, err := Render(testInput(user(map[string]any{"max_lease_ttl": "1h"}))); err == nil {
		t.Error("Render accepted a max_lease_ttl below OpenBao's default lease TTL")
	}
}

func TestEveryProtectedKeyIsRejected(t *testing.T) {
	for _, k := range ProtectedKeys() {
		_, err := Render(testInput(user(map[string]any{k: "x"})))
		if err == nil || !strings.Contains(err.Error(), `"`+k+`"`) {
			t.Errorf("user key %q: error %v, want one naming the key", k, err)
		}
	}
}

func TestRenderIsDeterministic(t *testing.T) {
	for name, in := range goldenCases {
		a, errA := Render(in)
		b, errB := Render(in)
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: two renderings differ (errors %v, %v)", name, errA, errB)
		}
	}
}

func TestUserValuesReadBackExactlyWithHCL1(t *testing.T) {
	tests := map[string]any{
		"an interpolation stays literal":          "${file(\"/etc/passwd\")}",
		"a template directive stays literal":      "%{ if true }x%{ endif }",
		"an HCL2 escape stays literal":            "$${x} %%{y}",
		"quotes and a closing brace cannot close": "\"}\nlistener \"tcp\" {",
		"control characters survive":              "a\x00b\x1fc\x7fd\r\t",
		"HCL1's reserved rune survives":           "\uE123",
		"unicode line separators survive":         "a\u2028b\u2029",
		"a lone dollar and percent stay":          "$ % ${ %{ $",
		"a backslash before a dollar":             "\\${x}",
		"a big whole number":                      json.Number("9007199254740993"),
		"a huge float":                            1e300,
		"a negative fraction":                     -0.125,
		"a JSON exponent":                         json.Number("1E5"),
		"a list of scalars":                       []any{"a", true, 1.5, json.Number("-3")},
		"an empty list":                           []any{},
		"nested objects with odd keys": map[string]any{
			"a b": map[string]any{"true": false, "${x}": "y", "\"": []any{}},
		},
		"repeated blocks": []any{map[string]any{"type": "file"}, map[string]any{"type": "socket"}},
	}
	for name, v := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := Render(testInput(user(map[string]any{"value": v})))
			if err != nil {
				t.Fatal(err)
			}
			decoded, err := decodeHCL1(out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !sameValue(v, decoded["value"]) {
				t.Errorf("HCL1 read %#v, want %#v\n%s", decoded["value"], v, out)
			}
		})
	}
}

func TestSelfInitRejectsWhatOpenBaoWouldRefuseAtStart(t *testing.T) {
	ok := InitRequest{Name: "a", Operation: "update", Path: "sys/auth/x"}
	tests := map[string]struct {
		reqs     []InitRequest
		wantText string
	}{
		"no requests":              {nil, "no requests"},
		"a name with a dot":        {[]InitRequest{{Name: "a.b", Operation: "update", Path: "p"}}, `"a.b"`},
		"an unknown operation":     {[]InitRequest{{Name: "a", Operation: "write", Path: "p"}}, `"write"`},
		"an empty path":            {[]InitRequest{{Name: "a", Operation: "update"}}, "empty path"},
		"two requests of one name": {[]InitRequest{ok, ok}, "duplicate"},
		"null data": {[]InitRequest{{Name: "a", Operation: "update", Path: "p",
			Data: map[string]any{"x": nil}}}, `"initialize.a.data.x"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := RenderSelfInit(tc.reqs)
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("error %v, want ErrInvalid mentioning %s", err, tc.wantText)
			}
		})
	}
}

func TestProtectedKeysAreSortedAndCopied(t *testing.T) {
	keys := ProtectedKeys()
	for i := 1; i < len(keys); i++ {
		if keys[i-1] >= keys[i] {
			t.Fatalf("not sorted at %q", keys[i])
		}
	}
	keys[0] = "changed"
	if ProtectedKeys()[0] == "changed" {
		t.Fatal("ProtectedKeys returns the package's own slice")
	}
}
