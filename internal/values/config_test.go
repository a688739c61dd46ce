package values_test

import (
	"strings"
	"testing"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/values"
)

func mustConfig(t *testing.T, c *v1alpha1.OpenBaoCluster) values.Config {
	t.Helper()
	cfg, err := values.ConfigFor(inputOf(c))
	if err != nil {
		t.Fatalf("ConfigFor: %v", err)
	}
	return cfg
}

func TestChecksumIgnoresInitialization(t *testing.T) {
	before := mustConfig(t, cluster())
	after := mustConfig(t, cluster(initialized))
	if before.HCL == after.HCL {
		t.Fatal("config.hcl should change at initialization (bootstrap join → auto_join); the test is vacuous")
	}
	if before.Checksum != after.Checksum {
		t.Errorf("checksum changed when status.initialized flipped: %s → %s (pods would roll)", before.Checksum, after.Checksum)
	}
}

func TestChecksumFollowsSpecConfig(t *testing.T) {
	cases := map[string]func(*v1alpha1.OpenBaoCluster){
		"a key added to spec.config":  withConfig("default_lease_ttl", `"768h"`),
		"the log level":               func(c *v1alpha1.OpenBaoCluster) { c.Spec.Configuration.Logging.Level = "debug" },
		"the TLS minimum version":     func(c *v1alpha1.OpenBaoCluster) { c.Spec.Configuration.Listener.TLSMinVersion = "tls13" },
		"the unauthenticated metrics": func(c *v1alpha1.OpenBaoCluster) { c.Spec.Configuration.Listener.UnauthenticatedMetricsAccess = true },
	}
	base := mustConfig(t, cluster(withConfig("max_lease_ttl", `"8760h"`)))
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			changed := mustConfig(t, cluster(withConfig("max_lease_ttl", `"8760h"`), change))
			if changed.Checksum == base.Checksum {
				t.Errorf("checksum unchanged after changing %s", name)
			}
		})
	}
	t.Run("a changed value in spec.config", func(t *testing.T) {
		changed := mustConfig(t, cluster(withConfig("max_lease_ttl", `"4380h"`)))
		if changed.Checksum == base.Checksum {
			t.Error("checksum unchanged after changing spec.config.max_lease_ttl")
		}
	})
}

// TestSpecConfigNumbersKeepTheirValue: spec.config is decoded with
// json.Number, and baoconfig writes each number in a canonical form that
// HCL1 reads back as the same value. The text itself is not kept (0.10 is
// written 0.1; see baoconfig.numberTokens), but the value must be.
func TestSpecConfigNumbersKeepTheirValue(t *testing.T) {
	cases := map[string]struct{ key, raw, wantLine string }{
		"a decimal with a trailing zero keeps its value":     {"sample_ratio", `0.10`, "sample_ratio = 0.1"},
		"an integer beyond 2^53 keeps every digit":           {"cache_size", `9007199254740993`, "cache_size = 9007199254740993"},
		"a negative integer keeps its sign":                  {"offset", `-42`, "offset = -42"},
		"an integer beyond 2^53 in a block keeps its digits": {"limits", `{"max": 9007199254740993}`, "max = 9007199254740993"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := mustConfig(t, cluster(withConfig(tc.key, tc.raw)))
			if !hasLine(cfg.HCL, tc.wantLine) {
				t.Errorf("config.hcl lacks the line %q:\n%s", tc.wantLine, cfg.HCL)
			}
		})
	}
}

// TestSpecConfigIntegerBeyondInt64IsRefused: OpenBao reads integers as
// int64, so a larger one is refused, naming the key, rather than rounded.
func TestSpecConfigIntegerBeyondInt64IsRefused(t *testing.T) {
	_, err := values.ConfigFor(inputOf(cluster(withConfig("cache_size", `12345678901234567890`))))
	if err == nil || !strings.Contains(err.Error(), "cache_size") || !strings.Contains(err.Error(), "64-bit") {
		t.Fatalf("got %v, want an error naming cache_size and the 64-bit range", err)
	}
	if cfg := mustConfig(t, cluster(withConfig("cache_size", `9223372036854775807`))); !hasLine(cfg.HCL, "cache_size = 9223372036854775807") {
		t.Fatalf("the largest int64 is not kept:\n%s", cfg.HCL)
	}
}

// hasLine reports whether text has a line equal to want after collapsing
// the alignment spaces hclwrite adds around "=".
func hasLine(text, want string) bool {
	return lineOf(text, strings.Fields(want)[0]) == want
}

func lineOf(text, key string) string {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == key && f[1] == "=" {
			return strings.Join(f, " ")
		}
	}
	return ""
}

func TestSpecConfigRejectsInvalidJSONNamingTheKey(t *testing.T) {
	_, err := values.ConfigFor(inputOf(cluster(withConfig("cache_size", `{`))))
	if err == nil || !strings.Contains(err.Error(), "spec.config.cache_size") {
		t.Fatalf("error %v, want one naming spec.config.cache_size", err)
	}
}

func TestSelfInitOnlyBeforeInitialization(t *testing.T) {
	selfInit := func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.SelfInit = &v1alpha1.SelfInitSpec{Enabled: true, Requests: []v1alpha1.SelfInitRequest{
			{Name: "enable-kv", Operation: "update", Path: "sys/mounts/kv"},
		}}
	}
	cases := map[string]struct {
		opts []func(*v1alpha1.OpenBaoCluster)
		want bool
	}{
		"self-init enabled before initialization renders stanzas": {opts: []func(*v1alpha1.OpenBaoCluster){selfInit}, want: true},
		"self-init enabled after initialization renders none":     {opts: []func(*v1alpha1.OpenBaoCluster){selfInit, initialized}},
		"no self-init renders none":                               {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := mustConfig(t, cluster(tc.opts...))
			if got := cfg.SelfInitHCL != ""; got != tc.want {
				t.Errorf("SelfInitHCL present = %v, want %v:\n%s", got, tc.want, cfg.SelfInitHCL)
			}
			if tc.want && !strings.Contains(cfg.SelfInitHCL, "sys/mounts/kv") {
				t.Errorf("SelfInitHCL lacks the request path:\n%s", cfg.SelfInitHCL)
			}
		})
	}
}

// TestACMEJoinsGoToTheInternalListener: no ACME CA issues the .svc names
// the servers join by, so both join methods dial the internal listener
// and verify it against the operator's CA; clients keep the ACME one, which
// orders by tls-alpn-01 only (http-01 is validated at port 80, which
// nothing routes to a server).
func TestACMEJoinsGoToTheInternalListener(t *testing.T) {
	acme := func(c *v1alpha1.OpenBaoCluster) {
		c.Spec.TLS = v1alpha1.TLSSpec{Mode: v1alpha1.TLSModeACME, ACME: &v1alpha1.ACMESpec{
			Directory: "https://acme.example.com/directory", Domains: []string{"bao.example.com"}}}
	}
	for name, c := range map[string]*v1alpha1.OpenBaoCluster{
		"bootstrap join": cluster(acme), "auto_join": cluster(acme, initialized),
	} {
		hcl := strings.Join(strings.Fields(mustConfig(t, c).HCL), " ")
		for _, want := range []string{`address = ":8200"`, `address = ":8202"`,
			`leader_ca_cert_file = "/etc/bao/tls/ca.crt"`, `tls_acme_disable_http_challenge = true`} {
			if !strings.Contains(hcl, want) {
				t.Errorf("%s: config.hcl lacks %s:\n%s", name, want, hcl)
			}
		}
		if name == "auto_join" && !strings.Contains(hcl, "auto_join_port = 8202") {
			t.Errorf("auto_join does not dial the internal listener:\n%s", hcl)
		}
		if name == "bootstrap join" && !strings.Contains(hcl, `svc:8202"`) {
			t.Errorf("the bootstrap join does not dial pod-0's internal listener:\n%s", hcl)
		}
	}
}
