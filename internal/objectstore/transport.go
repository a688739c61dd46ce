package objectstore

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"time"
)

// NewHTTPTransport is the HTTP transport every store uses: TLS 1.2 or
// later, verified by caPEM when set (a private endpoint) and by the system
// roots otherwise, with timeouts that end a stalled connection.
func NewHTTPTransport(caPEM []byte) (*http.Transport, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("object store CA bundle holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
		// Snapshots are compressed already.
		DisableCompression: true,
	}, nil
}
