package values

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/baoconfig"
)

// Paths inside the OpenBao container, as the chart mounts them.
const (
	TLSCertFile = "/etc/bao/tls/tls.crt"
	TLSKeyFile  = "/etc/bao/tls/tls.key"
	TLSCAFile   = "/etc/bao/tls/ca.crt"
	// ACMECAFile verifies a private ACME directory (tls.acme.caSecretRef).
	ACMECAFile = "/etc/bao/acme-ca/ca.crt"
	// StaticSealKeyID names the operator-generated static key; OpenBao
	// stores it with the wrapped root key, so it must never change for a key.
	StaticSealKeyID = "operator-1"
)

// telemetryRetention keeps Prometheus metrics in memory long enough for
// scrapes at any common interval.
const telemetryRetention = 24 * time.Hour

// ConfigFor renders the cluster's config.hcl and, before initialization
// with self-init enabled, its initialize stanzas.
func ConfigFor(input Input) (Config, error) {
	c := input.Cluster
	in, err := configInput(c, input.Initialized)
	if err != nil {
		return Config{}, err
	}
	hcl, err := baoconfig.Render(in)
	if err != nil {
		return Config{}, fmt.Errorf("render config.hcl: %w", err)
	}
	// The checksum covers the steady state only: the switch from the
	// bootstrap join to auto_join at initialization must not roll pods.
	steady := in
	steady.Raft.Initialized = true
	steadyHCL, err := baoconfig.Render(steady)
	if err != nil {
		return Config{}, fmt.Errorf("render config.hcl: %w", err)
	}
	sum := sha256.Sum256(steadyHCL)
	cfg := Config{HCL: string(hcl), Checksum: hex.EncodeToString(sum[:])}
	if input.ReadReplicas != nil {
		read := steady
		read.Raft.NonVoter = true
		readHCL, err := baoconfig.Render(read)
		if err != nil {
			return Config{}, fmt.Errorf("render the read replicas' config.hcl: %w", err)
		}
		readSum := sha256.Sum256(readHCL)
		cfg.ReadHCL, cfg.ReadChecksum = string(readHCL), hex.EncodeToString(readSum[:])
	}
	if cfg.SelfInitHCL, err = SelfInitFor(input); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// SelfInitFor renders the self-init requests (self-init.hcl); empty unless
// self-init is enabled and the cluster is not initialized yet.
func SelfInitFor(in Input) (string, error) {
	c := in.Cluster
	if c.Spec.SelfInit == nil || !c.Spec.SelfInit.Enabled || in.Initialized {
		return "", nil
	}
	reqs, err := selfInitRequests(c, in.Issuer)
	if err != nil {
		return "", err
	}
	selfInit, err := baoconfig.RenderSelfInit(reqs)
	if err != nil {
		return "", fmt.Errorf("render self-init: %w", err)
	}
	return string(selfInit), nil
}

func configInput(c *v1alpha1.OpenBaoCluster, initialized bool) (baoconfig.Input, error) {
	user, err := decodeObjectMap(c.Spec.Config, "spec.config")
	if err != nil {
		return baoconfig.Input{}, err
	}
	conf := c.Spec.Configuration
	return baoconfig.Input{
		Listener:            listenerInput(c),
		Internal:            internalListenerInput(c),
		Metrics:             metricsListenerInput(c),
		Raft:                raftInput(c, initialized),
		Seal:                sealInput(c),
		ServiceRegistration: true,
		Telemetry:           baoconfig.Telemetry{PrometheusRetentionTime: telemetryRetention, DisableHostname: true},
		LogLevel:            conf.Logging.Level,
		LogFormat:           conf.Logging.Format,
		User:                user,
	}, nil
}

func listenerInput(c *v1alpha1.OpenBaoCluster) baoconfig.Listener {
	l := baoconfig.Listener{
		UnauthenticatedMetricsAccess: c.Spec.Configuration.Listener.UnauthenticatedMetricsAccess,
	}
	minVersion := c.Spec.Configuration.Listener.TLSMinVersion
	if tlsMode(c) == v1alpha1.TLSModeACME && c.Spec.TLS.ACME != nil {
		acme := c.Spec.TLS.ACME
		l.TLS = baoconfig.TLS{Mode: baoconfig.TLSACME, MinVersion: minVersion, ACME: baoconfig.ACME{
			CADirectory: acme.Directory, Domains: acme.Domains, Email: acme.Email, DisableHTTPChallenge: true,
		}}
		if acme.CASecretRef != nil {
			l.TLS.ACME.CARootFile = ACMECAFile
		}
		return l
	}
	l.TLS = baoconfig.TLS{Mode: baoconfig.TLSFiles, CertFile: TLSCertFile, KeyFile: TLSKeyFile, MinVersion: minVersion}
	return l
}

// internalListenerInput is, with ACME, the listener on
// v1alpha1.InternalListenerPort that serves the operator-issued
// certificate; nil in the other modes, whose API listener serves one.
func internalListenerInput(c *v1alpha1.OpenBaoCluster) *baoconfig.Listener {
	if tlsMode(c) != v1alpha1.TLSModeACME {
		return nil
	}
	return &baoconfig.Listener{
		Address: fmt.Sprintf(":%d", v1alpha1.InternalListenerPort),
		TLS: baoconfig.TLS{Mode: baoconfig.TLSFiles, CertFile: TLSCertFile, KeyFile: TLSKeyFile,
			MinVersion: c.Spec.Configuration.Listener.TLSMinVersion},
		// The ServiceMonitor scrapes this listener with ACME.
		UnauthenticatedMetricsAccess: c.Spec.Configuration.Listener.UnauthenticatedMetricsAccess,
	}
}

// metricsListenerInput is, while the cluster's ServiceMonitor is on, the
// listener on v1alpha1.MetricsListenerPort that Prometheus scrapes without a
// token, with the certificate the API (or, with ACME, the internal)
// listener serves to in-cluster names. Why a listener rather than a token or
// unauthenticatedMetricsAccess: see baoconfig.Input.Metrics and docs/operate.md.
func metricsListenerInput(c *v1alpha1.OpenBaoCluster) *baoconfig.Listener {
	if !MetricsListener(c) {
		return nil
	}
	return &baoconfig.Listener{
		Address: fmt.Sprintf(":%d", v1alpha1.MetricsListenerPort),
		TLS: baoconfig.TLS{Mode: baoconfig.TLSFiles, CertFile: TLSCertFile, KeyFile: TLSKeyFile,
			MinVersion: c.Spec.Configuration.Listener.TLSMinVersion},
	}
}

// MetricsListener says whether spec.monitoring (or, without it,
// spec.values) turns the cluster's ServiceMonitor on, which config.hcl and
// the chart's metrics port follow. A spec.values that does not decode
// turns nothing on; Compute reports it.
func MetricsListener(c *v1alpha1.OpenBaoCluster) bool {
	if m := c.Spec.Monitoring; m != nil {
		return m.ServiceMonitor.Enabled
	}
	if c.Spec.Values == nil || len(c.Spec.Values.Raw) == 0 {
		return false
	}
	var vals struct {
		ServiceMonitor struct {
			Enabled bool `json:"enabled"`
		} `json:"serviceMonitor"`
	}
	if err := json.Unmarshal(c.Spec.Values.Raw, &vals); err != nil {
		return false
	}
	return vals.ServiceMonitor.Enabled
}

func raftInput(c *v1alpha1.OpenBaoCluster, initialized bool) baoconfig.Raft {
	timers := c.Spec.Configuration.Raft
	// Joins go to the listener whose certificate chains to the cluster's
	// CA: the internal one with ACME.
	return baoconfig.Raft{
		Initialized:         initialized,
		LeaderAPIAddr:       c.PodAPIAddress(0),
		LeaderCAFile:        TLSCAFile,
		LeaderTLSServerName: c.ClientServiceDNSName(),
		AutoJoin: baoconfig.AutoJoin{Namespace: c.Namespace, LabelSelector: c.PodLabelSelector(),
			Port: c.InternalAPIPort()},
		Timers: baoconfig.Timers{
			PerformanceMultiplier:      int(ptrOr(timers.PerformanceMultiplier, 0)),
			AutopilotReconcileInterval: durationOf(timers.AutopilotReconcileInterval),
			AutopilotUpdateInterval:    durationOf(timers.AutopilotUpdateInterval),
		},
	}
}

func sealInput(c *v1alpha1.OpenBaoCluster) baoconfig.Seal {
	t := sealType(c)
	if t == v1alpha1.UnsealStatic {
		return baoconfig.Seal{Type: baoconfig.SealStatic, KeyID: StaticSealKeyID}
	}
	return baoconfig.Seal{Type: baoconfig.SealType(t), Options: c.Spec.Unseal.Options}
}

// InitRequests converts the spec's self-init requests for baoconfig; a
// request whose data is not a JSON object is refused, naming its index.
func InitRequests(reqs []v1alpha1.SelfInitRequest) ([]baoconfig.InitRequest, error) {
	return initRequests(reqs)
}

// DecodeConfigValue decodes one spec.config value as config.hcl is
// rendered from it: numbers stay json.Number.
func DecodeConfigValue(raw []byte) (any, error) {
	var val any
	if err := decodeJSON(raw, &val); err != nil {
		return nil, err
	}
	return val, nil
}

func initRequests(reqs []v1alpha1.SelfInitRequest) ([]baoconfig.InitRequest, error) {
	out := make([]baoconfig.InitRequest, 0, len(reqs))
	for i, r := range reqs {
		data := map[string]any{}
		if r.Data != nil && len(r.Data.Raw) > 0 {
			if err := decodeJSON(r.Data.Raw, &data); err != nil {
				return nil, fmt.Errorf("spec.selfInit.requests[%d].data must be an object: %w", i, err)
			}
		}
		out = append(out, baoconfig.InitRequest{
			Name: r.Name, Operation: r.Operation, Path: r.Path, Data: data, AllowFailure: r.AllowFailure,
		})
	}
	return out, nil
}

// decodeObjectMap decodes JSON values as json.Number, so that integers stay
// integers and an integer beyond 64 bits is refused rather than rounded.
func decodeObjectMap(m map[string]apiextensionsv1.JSON, field string) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		val, err := DecodeConfigValue(v.Raw)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", field, k, err)
		}
		out[k] = val
	}
	return out, nil
}

func decodeJSON(raw []byte, into any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(into)
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func durationOf(d *metav1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}
