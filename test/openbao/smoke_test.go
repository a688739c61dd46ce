// Package openbao_test is the OpenBao tier: tests against the real bao 2.4.0
// binary on loopback.
//
// Every test but the store conformance suite (see there) runs in
// parallel: each starts its own bao processes, object stores and ACME
// server in its own directories on free ports, and mostly waits on them
// (Raft elections, sys/init), not on the CPU.
package openbao_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/test/baotest"
)

func TestHealthBeforeAndAfterInitWithStaticSeal(t *testing.T) {
	t.Parallel()
	bao := baotest.Start(t, baotest.Options{})

	status, body := request(t, http.MethodGet, bao.Addr+"/v1/sys/health", "")
	if status != http.StatusNotImplemented {
		t.Fatalf("health before init: got %d %s, want 501", status, body)
	}
	var health struct{ Initialized, Sealed bool }
	if err := json.Unmarshal([]byte(body), &health); err != nil || health.Initialized || !health.Sealed {
		t.Fatalf("health before init: body %s, want initialized=false sealed=true (%v)", body, err)
	}

	status, body = request(t, http.MethodPut, bao.Addr+"/v1/sys/init", "{}")
	if status != http.StatusOK {
		t.Fatalf("init: got %d", status)
	}
	var initResp struct {
		RootToken string `json:"root_token"`
	}
	if err := json.Unmarshal([]byte(body), &initResp); err != nil || initResp.RootToken == "" {
		t.Fatalf("init answered 200 without a root token (%v)", err)
	}

	deadline := time.Now().Add(30 * time.Second)
	for {
		status, body = request(t, http.MethodGet, bao.Addr+"/v1/sys/health", "")
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health after init: still %d %s", status, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if strings.Contains(bao.Log(), initResp.RootToken) {
		t.Fatal("the root token appears in the server log")
	}
}

func request(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data)
}
