package baoconfig

import (
	"encoding/json"
	"time"
)

// Builders for test inputs: a baseline and small options that change it.

const (
	testLeader = "https://bao-0.bao-internal.vault.svc:8200"
	testCAFile = "/etc/bao/tls/ca.crt"
)

type inputOption func(*Input)

func testInput(opts ...inputOption) Input {
	in := Input{
		Listener: Listener{TLS: TLS{
			Mode:     TLSFiles,
			CertFile: "/etc/bao/tls/tls.crt",
			KeyFile:  "/etc/bao/tls/tls.key",
		}},
		Raft: Raft{
			LeaderAPIAddr: testLeader,
			LeaderCAFile:  testCAFile,
		},
		Seal:                Seal{Type: SealStatic, KeyID: "bao-unseal-1"},
		ServiceRegistration: true,
		Telemetry:           Telemetry{PrometheusRetentionTime: 24 * time.Hour, DisableHostname: true},
		LogLevel:            "info",
		LogFormat:           "json",
	}
	for _, o := range opts {
		o(&in)
	}
	return in
}

func initialized(in *Input) {
	in.Raft.Initialized = true
	in.Raft.LeaderAPIAddr = ""
	in.Raft.LeaderTLSServerName = "bao.vault.svc"
	in.Raft.AutoJoin = AutoJoin{
		Namespace:     "vault",
		LabelSelector: "app.kubernetes.io/instance=bao,openbao-initialized=true",
	}
}

func externalTLS(in *Input) {
	in.Listener.TLS = TLS{
		Mode:         TLSFiles,
		CertFile:     "/etc/bao/external-tls/tls.crt",
		KeyFile:      "/etc/bao/external-tls/tls.key",
		ClientCAFile: "/etc/bao/external-tls/ca.crt",
		MinVersion:   "tls13",
	}
	in.Raft.LeaderCAFile = "/etc/bao/external-tls/ca.crt"
	in.Listener.UnauthenticatedMetricsAccess = true
}

// acme serves clients an ACME certificate from a private directory and
// the operator and the joiners the operator's on the internal listener.
func acme(in *Input) {
	in.Listener.TLS = TLS{Mode: TLSACME, ACME: ACME{
		CADirectory:          "https://acme.example.com/directory",
		CARootFile:           "/etc/bao/acme-ca/ca.crt",
		Domains:              []string{"bao.example.com"},
		Email:                "ops@example.com",
		DisableHTTPChallenge: true,
	}}
	in.Internal = &Listener{TLS: TLS{Mode: TLSFiles, CertFile: "/etc/bao/tls/tls.crt", KeyFile: "/etc/bao/tls/tls.key"}}
	in.Raft.LeaderAPIAddr = "https://bao-0.bao-internal.vault.svc:8202"
	in.Raft.LeaderTLSServerName = "bao.vault.svc"
}

// metrics adds the metrics listener, with the operator's certificate.
func metrics(in *Input) {
	in.Metrics = &Listener{TLS: TLS{Mode: TLSFiles, CertFile: "/etc/bao/tls/tls.crt", KeyFile: "/etc/bao/tls/tls.key"}}
}

func kms(t SealType, options map[string]string) inputOption {
	return func(in *Input) { in.Seal = Seal{Type: t, Options: options} }
}

func user(m map[string]any) inputOption {
	return func(in *Input) { in.User = m }
}

func timers(t Timers) inputOption {
	return func(in *Input) { in.Raft.Timers = t }
}

// goldenCases are rendered into testdata/<name>.hcl.
var goldenCases = map[string]Input{
	"static-bootstrap":   testInput(),
	"static-initialized": testInput(initialized),
	"read-replica":       testInput(initialized, func(in *Input) { in.Raft.NonVoter = true }),
	"static-rotation": testInput(func(in *Input) {
		in.Seal.KeyID, in.Seal.PreviousKeyID = "bao-unseal-2", "bao-unseal-1"
		in.Seal.PreviousKeyFile = "/etc/bao/unseal-previous/key"
	}),
	"external-tls": testInput(externalTLS),
	"acme":         testInput(acme),
	"metrics":      testInput(initialized, metrics),
	"acme-metrics": testInput(acme, metrics),
	"awskms": testInput(kms(SealAWSKMS, map[string]string{
		"region": "eu-west-1", "kms_key_id": "alias/openbao-unseal",
	})),
	"gcpckms": testInput(kms(SealGCPCKMS, map[string]string{
		"project": "acme", "region": "global", "key_ring": "openbao", "crypto_key": "unseal",
		"credentials": "/etc/bao/kms/credentials.json",
	})),
	"azurekeyvault": testInput(kms(SealAzureKeyVault, map[string]string{
		"tenant_id": "00000000-0000-0000-0000-000000000000", "client_id": "11111111-1111-1111-1111-111111111111",
		"vault_name": "openbao-kv", "key_name": "unseal",
	})),
	"transit": testInput(kms(SealTransit, map[string]string{
		"address": "https://transit.example.com:8200", "mount_path": "transit/", "key_name": "unseal",
		"tls_ca_cert": "/etc/bao/transit/ca.crt",
	})),
	"user-config": testInput(user(map[string]any{
		"default_lease_ttl":    "768h",
		"max_lease_ttl":        "8760h",
		"cache_size":           json.Number("131072"),
		"disable_cache":        false,
		"raw_storage_endpoint": true,
		"cluster_name":         "payments ${not-interpolated} %{nor-a-directive}",
		"ui":                   true,
		"log_requests_level":   "warn",
		"audit": []any{map[string]any{
			"type": "file", "path": "file/",
			"options": map[string]any{"file_path": "/bao/audit/audit.log", "format": "json"},
		}},
	})),
	"custom-timers": testInput(timers(Timers{
		PerformanceMultiplier:      5,
		AutopilotReconcileInterval: 10 * time.Second,
		AutopilotUpdateInterval:    2 * time.Second,
	})),
}

// goldenSelfInit is rendered into testdata/selfinit.hcl; OpenBao loads it
// together with static-bootstrap.hcl on pod-0.
var goldenSelfInit = []InitRequest{
	{Name: "enable_userpass", Operation: "update", Path: "sys/auth/userpass",
		Data: map[string]any{"type": "userpass", "description": "admins"}},
	{Name: "admin-user", Operation: "update", Path: "auth/userpass/users/admin",
		Data: map[string]any{
			"token_policies": []any{"admin"},
			"password": map[string]any{
				"eval_type": "string", "eval_source": "env", "env_var": "BAO_ADMIN_PASSWORD",
			},
		}},
	{Name: "kv", Operation: "update", Path: "sys/mounts/secret", AllowFailure: true,
		Data: map[string]any{"type": "kv", "options": map[string]any{"version": json.Number("2")}}},
}
