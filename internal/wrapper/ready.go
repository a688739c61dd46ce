package wrapper

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"
)

// The readiness check (bao-wrapper ready, the OpenBao container's
// readiness probe): a server is Ready when it serves clients, which the
// client Service sends to every Ready server. The active server serves
// them itself; a standby forwards them to the active server, and it can do
// so only once it knows which server that is. A restarted standby is
// unsealed seconds before the leader's Raft replication reaches it again
// (the leader's dial to the replaced pod's old address waits out a 10 s
// timeout), and until then it answers every request with HTTP 500 "local
// node not active but active cluster node not found"; sys/health, the
// probe before, reports it healthy all along.

// ReadyTimeout bounds each request of the check; the probe's own timeout
// is longer.
const ReadyTimeout = time.Second

// Leader is what the check reads of sys/leader.
type Leader struct {
	HAEnabled     bool   `json:"ha_enabled"`
	IsSelf        bool   `json:"is_self"`
	LeaderAddress string `json:"leader_address"`
}

// Readiness decides from sys/health's status code (asked with
// standbyok=true: 200 for an initialized, unsealed server, active or
// standby) and sys/leader's answer whether the server serves clients;
// the reason says why not.
func Readiness(healthCode int, leader Leader) (ready bool, reason string) {
	switch {
	case healthCode != http.StatusOK:
		return false, fmt.Sprintf("sys/health answers HTTP %d: not initialized and unsealed", healthCode)
	case !leader.HAEnabled, leader.IsSelf:
		return true, ""
	case leader.LeaderAddress == "":
		return false, "a standby that does not know the active server yet: it cannot forward requests"
	}
	return true, ""
}

// Ready runs the check against the server at BAO_ADDR (its CA in
// BAO_CACERT), both set in the OpenBao container; nil when it is ready.
// The certificate is verified for the server's stable name, the host of
// BAO_API_ADDR, when it is set: BAO_ADDR is a loopback address, which a
// certificate the user provides need not name, while the stable name is
// one it must carry (standbys redirect clients there). The requests carry
// no token: both paths are unauthenticated.
func Ready(ctx context.Context) error {
	addr := os.Getenv("BAO_ADDR")
	if addr == "" {
		return fmt.Errorf("BAO_ADDR is not set")
	}
	serverName := ""
	if api := os.Getenv("BAO_API_ADDR"); api != "" {
		u, err := url.Parse(api)
		if err != nil {
			return fmt.Errorf("BAO_API_ADDR: %w", err)
		}
		serverName = u.Hostname()
	}
	roots := x509.NewCertPool()
	if path := os.Getenv("BAO_CACERT"); path != "" {
		pem, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read BAO_CACERT: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return fmt.Errorf("BAO_CACERT %s holds no PEM certificate", path)
		}
	}
	hc := &http.Client{Timeout: ReadyTimeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12},
	}}
	code, _, err := get(ctx, hc, addr+"/v1/sys/health?standbyok=true&perfstandbyok=true")
	if err != nil {
		return err
	}
	var leader Leader
	if code == http.StatusOK {
		leaderCode, body, err := get(ctx, hc, addr+"/v1/sys/leader")
		if err != nil {
			return err
		}
		if leaderCode != http.StatusOK {
			return fmt.Errorf("sys/leader answers HTTP %d", leaderCode)
		}
		if err := json.Unmarshal(body, &leader); err != nil {
			return fmt.Errorf("decode sys/leader: %w", err)
		}
	}
	if ready, reason := Readiness(code, leader); !ready {
		return fmt.Errorf("%s", reason)
	}
	return nil
}

func get(ctx context.Context, hc *http.Client, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, nil, fmt.Errorf("read %s: %w", req.URL.Path, err)
	}
	return resp.StatusCode, body, nil
}
