// Package baoconfig renders OpenBao's server configuration (config.hcl) from
// typed inputs. It is pure: no Kubernetes types, no I/O.
//
// The file is built with hclwrite, never with string templates, so that no
// user string can open or close a stanza. OpenBao 2.4 reads its configuration
// with HCL version 1 (github.com/hashicorp/hcl v1.0.1-vault-5, as its go.mod
// pins), whose string escapes differ from HCL2's: hclwrite would write "${"
// as "$${", which HCL1 reads back literally. This package therefore writes every string literal
// itself with escapes that both dialects read the same way (see quoteHCL1),
// and its tests parse each rendering back with HCL1.
//
// Node identity is not rendered: every pod shares one file and OpenBao takes
// node_id, api_addr and cluster_addr from BAO_RAFT_NODE_ID, BAO_API_ADDR and
// BAO_CLUSTER_ADDR (physical/raft/raft.go and command/server.go in 2.4.0).
package baoconfig

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2/hclwrite"
)

// Defaults the operator renders when an input field is left empty.
const (
	DefaultAddress        = ":8200"
	DefaultClusterAddress = ":8201"
	// DefaultInternalAddress is the internal listener's (Input.Internal).
	DefaultInternalAddress = ":8202"
	// DefaultInternalClusterAddress: OpenBao opens a cluster listener for
	// every tcp listener (at its port + 1 when none is set) and fails when
	// two share an address; the internal listener's stays on loopback,
	// where no peer dials it.
	DefaultInternalClusterAddress = "127.0.0.1:8203"
	// DefaultMetricsAddress is the metrics listener's (Input.Metrics), and
	// DefaultMetricsClusterAddress its cluster listener's, on loopback for
	// the reason above.
	DefaultMetricsAddress        = ":8204"
	DefaultMetricsClusterAddress = "127.0.0.1:8205"
	DefaultDataPath              = "/bao/data"
	DefaultSealKeyFile           = "/etc/bao/unseal/key"
	DefaultACMECachePath         = "/bao/data/acme"
	DefaultTLSMinVersion         = "tls12"
	DefaultAutoJoinPort          = 8200

	// DefaultPerformanceMultiplier is the production setting Raft's authors
	// recommend; OpenBao's own default (5) is tuned for slow development
	// machines and delays the first election by up to 10 s.
	DefaultPerformanceMultiplier = 1
	// DefaultAutopilotReconcileInterval and DefaultAutopilotUpdateInterval
	// let autopilot promote joiners within seconds instead of about 20 s
	// (measured: 3 voters in 10 s instead of 30 s). Their cost is a few
	// local RPCs per second on the leader.
	DefaultAutopilotReconcileInterval = time.Second
	DefaultAutopilotUpdateInterval    = time.Second
)

// The log settings OpenBao accepts (helper/logging), in their canonical
// spelling; a bad one stops the server at start.
var (
	logLevels  = []string{"trace", "debug", "info", "warn", "error"}
	logFormats = []string{"standard", "json"}
)

// ErrInvalid is wrapped by every error that reports a bad input.
var ErrInvalid = errors.New("invalid OpenBao configuration input")

// Input is everything config.hcl is rendered from.
type Input struct {
	Listener Listener
	// Internal, when set, is a second listener beside an ACME Listener,
	// serving certificate files that the operator's CA signs: the
	// operator and the joining servers dial in-cluster .svc names, which
	// no ACME CA issues. Its addresses default to DefaultInternalAddress
	// and DefaultInternalClusterAddress.
	Internal *Listener
	// Metrics, when set, is a listener that serves /v1/sys/metrics without
	// a token, for Prometheus, so that the API listener can keep asking
	// for one. OpenBao 2.4 cannot restrict a server listener to metrics
	// (its listener role "metrics_only" is for the agent and the proxy; a
	// server ignores it), so this listener serves the whole API as well,
	// with tokens as usual: the NetworkPolicy is what keeps its port to
	// the scrapers. Its addresses default to DefaultMetricsAddress and
	// DefaultMetricsClusterAddress; it is always unauthenticated for
	// metrics.
	Metrics             *Listener
	Raft                Raft
	Seal                Seal
	ServiceRegistration bool // service_registration "kubernetes" {}; it reads BAO_K8S_NAMESPACE and BAO_K8S_POD_NAME
	Telemetry           Telemetry
	LogLevel            string // trace, debug, info, warn, error; empty leaves OpenBao's default
	LogFormat           string // standard or json; empty leaves OpenBao's default
	// User holds the top-level keys of spec.config after a JSON decode,
	// written after the operator's stanzas in sorted order. Keys are lower
	// snake case (^[a-z][a-z0-9_]*$) and not in ProtectedKeys; "ui"
	// replaces the operator's ui = false. Values:
	//   - string (valid UTF-8), bool, float64 (finite), json.Number, int,
	//     int64; whole numbers are written as integers;
	//   - []any of scalars (an attribute list) or of objects only (one
	//     unlabelled block per element, as repeated audit stanzas);
	//   - map[string]any: an unlabelled block; nested keys are any
	//     non-empty UTF-8 string (quoted when not an identifier).
	// Null, lists of lists, mixed lists and nesting deeper than 16 levels
	// are rejected with an error naming the key path. Stanzas that need a
	// label (user_lockout "all" { }) cannot be expressed.
	User map[string]any
}

// TLSMode says where the listener's certificate comes from.
type TLSMode string

const (
	// TLSFiles serves a certificate and key from files (OperatorManaged or
	// External certificates mounted from a Secret).
	TLSFiles TLSMode = "Files"
	// TLSACME lets OpenBao obtain its certificate from an ACME directory.
	TLSACME TLSMode = "ACME"
)

// Listener is the single listener "tcp" stanza.
type Listener struct {
	Address        string // default DefaultAddress
	ClusterAddress string // default DefaultClusterAddress
	TLS            TLS
	// UnauthenticatedMetricsAccess lets Prometheus scrape /v1/sys/metrics
	// without a token.
	UnauthenticatedMetricsAccess bool
}

// TLS configures the listener's TLS.
type TLS struct {
	Mode         TLSMode
	CertFile     string // TLSFiles
	KeyFile      string // TLSFiles
	ClientCAFile string // optional: CA for client certificates
	MinVersion   string // tls12 or tls13; default DefaultTLSMinVersion
	ACME         ACME   // TLSACME
}

// ACME configures certificates from an ACME directory.
type ACME struct {
	CADirectory string   // tls_acme_ca_directory
	CARootFile  string   // tls_acme_ca_root: CA that signs the directory's TLS, for private directories
	Domains     []string // tls_acme_domains
	Email       string   // tls_acme_email
	CachePath   string   // tls_acme_cache_path; default DefaultACMECachePath, on the data volume so restarts do not re-order
	// DisableHTTPChallenge leaves tls-alpn-01, which the CA validates on
	// the API listener itself: http-01 is validated at the domain's port
	// 80, which nothing routes to a server.
	DisableHTTPChallenge bool // tls_acme_disable_http_challenge
}

// Raft is the storage "raft" stanza.
type Raft struct {
	Path string // default DefaultDataPath
	// Initialized selects the join method: before initialization every pod
	// joins pod-0 by its stable DNS name; after it, pods find the members
	// through the Kubernetes API, so that losing pod-0 does not stop joins.
	Initialized   bool
	LeaderAPIAddr string // bootstrap: https://<cluster>-0.<headless>.<ns>.svc:8200
	// LeaderCAFile verifies the leader's certificate (bootstrap and
	// auto_join); empty uses the system roots.
	LeaderCAFile string
	// LeaderTLSServerName is the name to verify in the leader's certificate
	// when auto_join dials pod IPs that the certificate does not carry.
	LeaderTLSServerName string
	AutoJoin            AutoJoin
	Timers              Timers
	// NonVoter joins as a Raft non-voter (retry_join_as_non_voter), as the
	// read replicas do: it replicates, never votes and is never promoted,
	// so it counts neither toward quorum nor autopilot's failure
	// tolerance. Only with Initialized: a read replica joins a cluster
	// that exists, and a non-voter cannot bootstrap one.
	NonVoter bool
}

// AutoJoin is the go-discover "k8s" provider query used after initialization.
type AutoJoin struct {
	Namespace     string
	LabelSelector string
	Port          int // default DefaultAutoJoinPort
}

// Timers are Raft and autopilot timers; zero values take the defaults above.
type Timers struct {
	PerformanceMultiplier      int
	AutopilotReconcileInterval time.Duration
	AutopilotUpdateInterval    time.Duration
}

// Telemetry is the telemetry stanza.
type Telemetry struct {
	// PrometheusRetentionTime enables the Prometheus format of
	// /v1/sys/metrics; zero leaves OpenBao's default (24h).
	PrometheusRetentionTime time.Duration
	DisableHostname         bool
}

// Render returns config.hcl for the input. The output is deterministic: the
// same input gives the same bytes, user keys in sorted order after the
// operator's stanzas.
func Render(in Input) ([]byte, error) {
	if err := ValidateUser(in.User); err != nil {
		return nil, err
	}
	if in.LogLevel != "" && !contains(logLevels, in.LogLevel) {
		return nil, invalidf("log level %q: want one of %v", in.LogLevel, logLevels)
	}
	if in.LogFormat != "" && !contains(logFormats, in.LogFormat) {
		return nil, invalidf("log format %q: want one of %v", in.LogFormat, logFormats)
	}
	f := hclwrite.NewEmptyFile()
	body := f.Body()
	renderGlobals(body, in)
	if err := renderListener(body, in.Listener); err != nil {
		return nil, err
	}
	if err := renderInternalListener(body, in.Listener, in.Internal); err != nil {
		return nil, err
	}
	if err := renderMetricsListener(body, in); err != nil {
		return nil, err
	}
	if err := renderRaft(body, in.Raft); err != nil {
		return nil, err
	}
	if err := renderSeal(body, in.Seal); err != nil {
		return nil, err
	}
	if in.ServiceRegistration {
		body.AppendNewline()
		body.AppendNewBlock("service_registration", []string{"kubernetes"})
	}
	renderTelemetry(body, in.Telemetry)
	if err := renderUser(body, in.User); err != nil {
		return nil, err
	}
	return f.Bytes(), nil
}

// renderGlobals writes the top-level attributes the operator owns.
// ui defaults to false because the operator's image carries no UI; a user
// key "ui" replaces the default. disable_mlock is not written: OpenBao 2.4
// dropped mlock, reports disable_mlock = true as an unknown key and refuses
// to start with false.
func renderGlobals(body *hclwrite.Body, in Input) {
	if _, ok := in.User["ui"]; !ok {
		body.SetAttributeRaw("ui", boolTokens(false))
	}
	if in.LogLevel != "" {
		body.SetAttributeRaw("log_level", stringTokens(in.LogLevel))
	}
	if in.LogFormat != "" {
		body.SetAttributeRaw("log_format", stringTokens(in.LogFormat))
	}
}

func renderTelemetry(body *hclwrite.Body, t Telemetry) {
	body.AppendNewline()
	tb := body.AppendNewBlock("telemetry", nil).Body()
	if t.PrometheusRetentionTime > 0 {
		tb.SetAttributeRaw("prometheus_retention_time", stringTokens(formatDuration(t.PrometheusRetentionTime)))
	}
	tb.SetAttributeRaw("disable_hostname", boolTokens(t.DisableHostname))
}

func invalidf(format string, args ...any) error {
	return &InputError{Reason: fmt.Sprintf(format, args...)}
}

// InputError is a bad input; Reason says what is wrong without the
// ErrInvalid prefix, for callers that name the field themselves (the
// admission webhook).
type InputError struct{ Reason string }

func (e *InputError) Error() string { return ErrInvalid.Error() + ": " + e.Reason }

// Unwrap makes every InputError an ErrInvalid.
func (e *InputError) Unwrap() error { return ErrInvalid }
