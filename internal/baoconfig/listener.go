package baoconfig

import (
	"github.com/hashicorp/hcl/v2/hclwrite"
)

func renderListener(body *hclwrite.Body, l Listener) error {
	body.AppendNewline()
	lb := body.AppendNewBlock("listener", []string{"tcp"}).Body()
	lb.SetAttributeRaw("address", stringTokens(orDefault(l.Address, DefaultAddress)))
	lb.SetAttributeRaw("cluster_address", stringTokens(orDefault(l.ClusterAddress, DefaultClusterAddress)))
	minVersion := orDefault(l.TLS.MinVersion, DefaultTLSMinVersion)
	if minVersion != "tls12" && minVersion != "tls13" {
		return invalidf("listener: TLS minimum version %q: want tls12 or tls13", minVersion)
	}
	lb.SetAttributeRaw("tls_min_version", stringTokens(minVersion))
	switch l.TLS.Mode {
	case TLSFiles:
		if err := renderTLSFiles(lb, l.TLS); err != nil {
			return err
		}
	case TLSACME:
		if err := renderACME(lb, l.TLS.ACME); err != nil {
			return err
		}
	default:
		return invalidf("listener: TLS mode %q: want %s or %s", l.TLS.Mode, TLSFiles, TLSACME)
	}
	if l.TLS.ClientCAFile != "" {
		lb.SetAttributeRaw("tls_client_ca_file", stringTokens(l.TLS.ClientCAFile))
	}
	if l.UnauthenticatedMetricsAccess {
		tb := lb.AppendNewBlock("telemetry", nil).Body()
		tb.SetAttributeRaw("unauthenticated_metrics_access", boolTokens(true))
	}
	return nil
}

// renderInternalListener writes the internal listener, if any, after the
// main one: a client of the API port sees the same listener first as
// without it.
func renderInternalListener(body *hclwrite.Body, main Listener, internal *Listener) error {
	if internal == nil {
		return nil
	}
	l := *internal
	l.Address = orDefault(l.Address, DefaultInternalAddress)
	l.ClusterAddress = orDefault(l.ClusterAddress, DefaultInternalClusterAddress)
	if l.TLS.Mode != TLSFiles {
		return invalidf("internal listener: TLS mode %q: want %s, certificates the operator issues", l.TLS.Mode, TLSFiles)
	}
	if l.Address == orDefault(main.Address, DefaultAddress) ||
		l.ClusterAddress == orDefault(main.ClusterAddress, DefaultClusterAddress) {
		return invalidf("internal listener: addresses %q and %q must differ from the main listener's", l.Address, l.ClusterAddress)
	}
	return renderListener(body, l)
}

// renderMetricsListener writes the metrics listener, if any, last. Its
// addresses must differ from every other listener's: OpenBao fails to
// start when two listeners share one.
func renderMetricsListener(body *hclwrite.Body, in Input) error {
	if in.Metrics == nil {
		return nil
	}
	l := *in.Metrics
	l.Address = orDefault(l.Address, DefaultMetricsAddress)
	l.ClusterAddress = orDefault(l.ClusterAddress, DefaultMetricsClusterAddress)
	l.UnauthenticatedMetricsAccess = true
	if l.TLS.Mode != TLSFiles {
		return invalidf("metrics listener: TLS mode %q: want %s, certificates the operator issues", l.TLS.Mode, TLSFiles)
	}
	taken := []string{orDefault(in.Listener.Address, DefaultAddress), orDefault(in.Listener.ClusterAddress, DefaultClusterAddress)}
	if in.Internal != nil {
		taken = append(taken, orDefault(in.Internal.Address, DefaultInternalAddress),
			orDefault(in.Internal.ClusterAddress, DefaultInternalClusterAddress))
	}
	if contains(taken, l.Address) || contains(taken, l.ClusterAddress) {
		return invalidf("metrics listener: addresses %q and %q must differ from the other listeners' %v", l.Address, l.ClusterAddress, taken)
	}
	return renderListener(body, l)
}

func renderTLSFiles(lb *hclwrite.Body, t TLS) error {
	if t.CertFile == "" || t.KeyFile == "" {
		return invalidf("listener: TLS mode %s needs a certificate file and a key file", TLSFiles)
	}
	lb.SetAttributeRaw("tls_cert_file", stringTokens(t.CertFile))
	lb.SetAttributeRaw("tls_key_file", stringTokens(t.KeyFile))
	return nil
}

// renderACME writes the ACME attributes. OpenBao chooses ACME when a TLS
// listener has no tls_cert_file.
func renderACME(lb *hclwrite.Body, a ACME) error {
	if a.CADirectory == "" {
		return invalidf("listener: TLS mode %s needs a CA directory URL", TLSACME)
	}
	if len(a.Domains) == 0 {
		// Without domains OpenBao orders a certificate for any SNI name a
		// client sends.
		return invalidf("listener: TLS mode %s needs at least one domain", TLSACME)
	}
	lb.SetAttributeRaw("tls_acme_ca_directory", stringTokens(a.CADirectory))
	if a.CARootFile != "" {
		lb.SetAttributeRaw("tls_acme_ca_root", stringTokens(a.CARootFile))
	}
	domains := make([]hclwrite.Tokens, 0, len(a.Domains))
	for _, d := range a.Domains {
		if d == "" {
			return invalidf("listener: empty ACME domain")
		}
		domains = append(domains, stringTokens(d))
	}
	lb.SetAttributeRaw("tls_acme_domains", hclwrite.TokensForTuple(domains))
	if a.Email != "" {
		lb.SetAttributeRaw("tls_acme_email", stringTokens(a.Email))
	}
	lb.SetAttributeRaw("tls_acme_cache_path", stringTokens(orDefault(a.CachePath, DefaultACMECachePath)))
	if a.DisableHTTPChallenge {
		lb.SetAttributeRaw("tls_acme_disable_http_challenge", boolTokens(true))
	}
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
