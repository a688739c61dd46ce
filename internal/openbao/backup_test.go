package openbao_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/internal/openbao"
)

func serverWith(t *testing.T, timeout time.Duration, handler http.HandlerFunc) openbao.Client {
	t.Helper()
	srv := httptest.NewTLSServer(handler)
	t.Cleanup(srv.Close)
	c, err := openbao.New(openbao.Options{Address: srv.URL, CACert: caPEM(srv), Token: openbao.NewToken("op-token"), Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSnapshotStreamsLongerThanTheRequestTimeout(t *testing.T) {
	c := serverWith(t, 200*time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/sys/storage/raft/snapshot" || r.Header.Get("X-Vault-Token") != "op-token" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "application/gzip")
		for i := range 5 { // about half a second, well past the timeout
			w.Write(bytes.Repeat([]byte{byte(i)}, 1000))
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	})
	body, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	data, err := io.ReadAll(body)
	if err != nil || len(data) != 5000 {
		t.Fatalf("read %d bytes: %v", len(data), err)
	}
}

func TestSnapshotGivesUpWhenNoAnswerComes(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	c := serverWith(t, 100*time.Millisecond, func(w http.ResponseWriter, r *http.Request) { <-release })
	start := time.Now()
	_, err := c.Snapshot(context.Background())
	var te *openbao.TransportError
	if !errors.As(err, &te) || time.Since(start) > 5*time.Second {
		t.Fatalf("%v after %s, want a transport error after the timeout", err, time.Since(start))
	}
}

func TestSnapshotFromAStandbyIsNotFollowed(t *testing.T) {
	followed := false
	c := serverWith(t, 0, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			followed = true
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	})
	_, err := c.Snapshot(context.Background())
	if !errors.Is(err, openbao.ErrStandby) || followed {
		t.Fatalf("%v (followed: %v), want ErrStandby and no second request", err, followed)
	}
}

func TestSnapshotRefusedKeepsOpenBaosReason(t *testing.T) {
	c := serverWith(t, 0, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"errors":["permission denied"]}`))
	})
	_, err := c.Snapshot(context.Background())
	if !errors.Is(err, openbao.ErrPermissionDenied) || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("%v", err)
	}
}

func TestLeaderReadsTheActiveAddress(t *testing.T) {
	c := serverWith(t, 0, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"ha_enabled":true,"is_self":false,"leader_address":"https://bao-1.bao-internal.ns.svc:8200"}`))
	})
	l, err := c.Leader(context.Background())
	if err != nil || l.IsSelf || l.LeaderAddress != "https://bao-1.bao-internal.ns.svc:8200" {
		t.Fatalf("%+v %v", l, err)
	}
}
