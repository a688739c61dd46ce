// Package openbao is the operator's client of one OpenBao server: a small
// interface the reconciler injects, an implementation over
// github.com/openbao/openbao/api/v2, and typed errors for OpenBao's HTTP
// answers. No response body of sys/init ever reaches an error.
package openbao

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/openbao/openbao/api/v2"
)

// DefaultTimeout bounds one request. sys/init takes about 6 s with OpenBao's
// default Raft timers and 1 to 2 s with the operator's.
const DefaultTimeout = 30 * time.Second

// DialTimeout bounds opening a connection to a server.
const DialTimeout = 3 * time.Second

// Options say how to reach one server.
type Options struct {
	// Address is the server's API URL, for example
	// https://bao-0.bao-internal.ns.svc:8200.
	Address string
	// CACert is the PEM CA bundle that verifies the server's certificate;
	// empty uses the system roots.
	CACert []byte
	// ServerName overrides the name verified in the certificate.
	ServerName string
	// Token authenticates requests that need one; zero sends none.
	Token Token
	// Timeout bounds each request; zero means DefaultTimeout.
	Timeout time.Duration
}

type client struct {
	api *api.Client
	// Streams (snapshots) bypass api.Client, whose timeout would cut a
	// long body short.
	http    *http.Client
	address string
	token   Token
	timeout time.Duration
}

var _ Client = (*client)(nil)

// New returns a Client for one server. It reads no environment variable
// (no BAO_TOKEN, no BAO_ADDR) and never retries: the reconciler retries with
// its own backoff, and a retried sys/init could lose a token.
func New(opts Options) (Client, error) {
	httpClient, err := httpClientFor(opts)
	if err != nil {
		return nil, err
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	c, err := api.NewClient(&api.Config{
		Address:            opts.Address,
		HttpClient:         httpClient,
		DisableEnvironment: true,
		MaxRetries:         0,
		Timeout:            timeout,
	})
	if err != nil {
		return nil, fmt.Errorf("openbao client for %s: %w", opts.Address, err)
	}
	c.ClearToken()
	if !opts.Token.IsZero() {
		c.SetToken(opts.Token.Reveal())
	}
	return &client{api: c, http: httpClient, address: opts.Address, token: opts.Token, timeout: timeout}, nil
}

func httpClientFor(opts Options) (*http.Client, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: opts.ServerName}
	if len(opts.CACert) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(opts.CACert) {
			return nil, fmt.Errorf("openbao client for %s: the CA bundle holds no PEM certificate", opts.Address)
		}
		tlsConfig.RootCAs = pool
	}
	transport := &http.Transport{
		// A pod that was just replaced can leave its old address in DNS for
		// a while; connecting there must fail in seconds, not hold a
		// reconcile pass for the whole request timeout.
		DialContext:         (&net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     30 * time.Second,
	}
	return &http.Client{
		Transport: transport,
		// A standby may answer 307; following it would send the token to
		// whatever address the redirect names.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

func (c *client) Health(ctx context.Context) (Health, error) {
	// The api client asks with *code=299 parameters, so that 429, 501 and
	// 503 come back as 299 with the state in the body.
	h, err := c.api.Sys().HealthWithContext(ctx)
	if err != nil {
		return Health{}, wrap("sys/health", err, true)
	}
	return Health{
		Initialized: h.Initialized, Sealed: h.Sealed, Standby: h.Standby,
		Version: h.Version, ClusterID: h.ClusterID,
	}, nil
}

// initBody is sent instead of api.InitRequest, which has no omitempty and
// would send secret_shares = 0 to seals that refuse the field.
type initBody struct {
	RecoveryShares    int      `json:"recovery_shares,omitempty"`
	RecoveryThreshold int      `json:"recovery_threshold,omitempty"`
	RecoveryPGPKeys   []string `json:"recovery_pgp_keys,omitempty"`
}

type initAnswer struct {
	RootToken       string   `json:"root_token"`
	RecoveryKeysB64 []string `json:"recovery_keys_base64"`
}

func (c *client) Init(ctx context.Context, req InitRequest) (InitResult, error) {
	r := c.api.NewRequest(http.MethodPut, "/v1/sys/init")
	if err := r.SetJSONBody(initBody(req)); err != nil {
		return InitResult{}, fmt.Errorf("openbao sys/init: encode request: %w", err)
	}
	// Sys().InitWithContext would send secret_shares; Logical() would parse
	// the answer as a Secret and drop root_token.
	resp, err := c.api.RawRequestWithContext(ctx, r)
	if resp != nil && resp.Body != nil {
		defer resp.Body.Close()
	}
	if err != nil {
		return InitResult{}, wrap("sys/init", err, false)
	}
	var answer initAnswer
	// The decoder's error may quote the body, which holds the token.
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || answer.RootToken == "" {
		return InitResult{}, fmt.Errorf("openbao sys/init: %w", ErrUnreadableResponse)
	}
	out := InitResult{RootToken: NewToken(answer.RootToken)}
	for _, k := range answer.RecoveryKeysB64 {
		out.RecoveryKeys = append(out.RecoveryKeys, NewToken(k))
	}
	return out, nil
}

func (c *client) StepDown(ctx context.Context) error {
	if err := c.api.Sys().StepDownWithContext(ctx); err != nil {
		return wrap("sys/step-down", err, true)
	}
	return nil
}

// wrap turns an error of the api package into a *StatusError or a
// *TransportError. keepMessages is false for calls whose answers may hold
// secrets: their messages are dropped.
func wrap(op string, err error, keepMessages bool) error {
	var respErr *api.ResponseError
	if errors.As(err, &respErr) {
		se := &StatusError{Op: op, Code: respErr.StatusCode}
		if keepMessages && !respErr.RawError {
			se.Messages = append([]string(nil), respErr.Errors...)
		}
		return se
	}
	if !keepMessages {
		// A *url.Error names the URL and the network failure, never a body;
		// any other error of the api package might quote one.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			return &TransportError{Op: op, Err: urlErr}
		}
		return &TransportError{Op: op, Err: errors.New(transportKind(err))}
	}
	return &TransportError{Op: op, Err: err}
}

// transportKind names a failure without its text, for calls whose bodies
// may hold secrets.
func transportKind(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	var tlsErr *tls.CertificateVerificationError
	if errors.As(err, &tlsErr) {
		return "TLS certificate verification failed"
	}
	return "request failed"
}
