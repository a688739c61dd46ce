package openbao_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/internal/openbao"
)

const secretToken = "s.root-token-never-printed"

// server answers like OpenBao 2.4.0 on the paths the client uses.
func server(t *testing.T, handler http.HandlerFunc) openbao.Client {
	t.Helper()
	srv := httptest.NewTLSServer(handler)
	t.Cleanup(srv.Close)
	c, err := openbao.New(openbao.Options{Address: srv.URL, CACert: caPEM(srv), Token: openbao.NewToken("op-token")})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestHealthTurnsEveryStateIntoAnAnswerNotAnError(t *testing.T) {
	tests := map[string]openbao.Health{
		"an uninitialized server (501)": {Initialized: false, Sealed: true},
		"a sealed server (503)":         {Initialized: true, Sealed: true},
		"a standby (429)":               {Initialized: true, Standby: true},
		"the active server (200)":       {Initialized: true},
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			c := server(t, func(w http.ResponseWriter, r *http.Request) {
				// OpenBao honours the *code parameters the client sends.
				if r.URL.Query().Get("uninitcode") == "" || r.URL.Query().Get("sealedcode") == "" || r.URL.Query().Get("standbycode") == "" {
					w.WriteHeader(http.StatusInternalServerError)
					return
				}
				w.WriteHeader(299)
				_ = json.NewEncoder(w).Encode(map[string]any{"initialized": want.Initialized, "sealed": want.Sealed, "standby": want.Standby})
			})
			got, err := c.Health(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got.Initialized != want.Initialized || got.Sealed != want.Sealed || got.Standby != want.Standby {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestInitSendsAnEmptyObjectForAutoUnsealSeals(t *testing.T) {
	var body string
	c := server(t, func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		body = string(data)
		_ = json.NewEncoder(w).Encode(map[string]any{"root_token": secretToken, "keys": []string{}})
	})
	res, err := c.Init(context.Background(), openbao.InitRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(body) != "{}" {
		t.Errorf("sent %q, want {}", body)
	}
	if res.RootToken.Reveal() != secretToken {
		t.Errorf("root token not returned")
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		if out := fmt.Sprintf(verb, res); strings.Contains(out, secretToken) || strings.Contains(out, fmt.Sprintf("%x", secretToken)) {
			t.Errorf("%s prints the token: %s", verb, out)
		}
	}
	if data, _ := json.Marshal(res); strings.Contains(string(data), secretToken) {
		t.Errorf("JSON carries the token: %s", data)
	}
}

func TestInitSendsRecoverySharesWhenAsked(t *testing.T) {
	var got map[string]any
	c := server(t, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&got)
		_ = json.NewEncoder(w).Encode(map[string]any{"root_token": secretToken, "recovery_keys_base64": []string{"rk"}})
	})
	res, err := c.Init(context.Background(), openbao.InitRequest{RecoveryShares: 1, RecoveryThreshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got["recovery_shares"] != float64(1) || got["recovery_threshold"] != float64(1) || got["secret_shares"] != nil {
		t.Errorf("sent %v", got)
	}
	if len(res.RecoveryKeys) != 1 || res.RecoveryKeys[0].Reveal() != "rk" {
		t.Errorf("recovery keys not returned")
	}
}

func TestInitErrorsNeverCarryTheBody(t *testing.T) {
	tests := map[string]struct {
		status int
		body   string
		is     error
	}{
		"a refusal whose body quotes a token": {http.StatusBadRequest, `{"errors":["` + secretToken + `"]}`, openbao.ErrInvalidRequest},
		"a sealed server":                     {http.StatusServiceUnavailable, `{"errors":["` + secretToken + `"]}`, openbao.ErrSealed},
		"a 200 whose body is not JSON":        {http.StatusOK, `not json ` + secretToken, openbao.ErrUnreadableResponse},
		"a 200 without a root token":          {http.StatusOK, `{"keys":["` + secretToken + `"]}`, openbao.ErrUnreadableResponse},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := server(t, func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			})
			_, err := c.Init(context.Background(), openbao.InitRequest{})
			if !errors.Is(err, tc.is) {
				t.Fatalf("error %v, want %v", err, tc.is)
			}
			if strings.Contains(err.Error(), secretToken) {
				t.Errorf("the error carries the body: %v", err)
			}
		})
	}
}

func TestStatusErrorsMatchTheirSentinelsAndKeepMessagesOutsideInit(t *testing.T) {
	c := server(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"errors":["min_quorum must be at least 3"]}`))
	})
	err := c.SetAutopilotConfiguration(context.Background(), openbao.AutopilotConfig{CleanupDeadServers: true, MinQuorum: 1})
	var se *openbao.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusBadRequest || !errors.Is(err, openbao.ErrInvalidRequest) {
		t.Fatalf("error %v, want a 400 StatusError", err)
	}
	if errors.Is(err, openbao.ErrSealed) || !strings.Contains(err.Error(), "min_quorum") {
		t.Errorf("error %v", err)
	}
	for code, sentinel := range map[int]error{501: openbao.ErrNotInitialized, 503: openbao.ErrSealed, 429: openbao.ErrStandby, 403: openbao.ErrPermissionDenied} {
		if !errors.Is(&openbao.StatusError{Code: code}, sentinel) {
			t.Errorf("%d does not match %v", code, sentinel)
		}
	}
}

func TestRaftConfigurationSplitsVotersAndNonVoters(t *testing.T) {
	var token string
	c := server(t, func(w http.ResponseWriter, r *http.Request) {
		token = r.Header.Get("X-Vault-Token")
		_, _ = w.Write([]byte(`{"data":{"config":{"servers":[
			{"node_id":"bao-0","address":"a:8201","leader":true,"voter":true},
			{"node_id":"bao-1","address":"b:8201","leader":false,"voter":true},
			{"node_id":"bao-2","address":"c:8201","leader":false,"voter":false}]}}}`))
	})
	got, err := c.RaftConfiguration(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if token != "op-token" {
		t.Errorf("token header %q", token)
	}
	if v, nv := got.Voters(), got.NonVoters(); len(v) != 2 || len(nv) != 1 || nv[0] != "bao-2" {
		t.Errorf("voters %v non-voters %v", v, nv)
	}
}

func TestAutopilotRoundTrip(t *testing.T) {
	var sent map[string]any
	c := server(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			_, _ = w.Write([]byte(`{"data":{"cleanup_dead_servers":true,"dead_server_last_contact_threshold":"5m0s",
				"last_contact_threshold":"10s","max_trailing_logs":1000,"min_quorum":3,"server_stabilization_time":"10s"}}`))
			return
		}
		_ = json.NewDecoder(r.Body).Decode(&sent)
		w.WriteHeader(http.StatusNoContent)
	})
	want := openbao.AutopilotConfig{CleanupDeadServers: true, DeadServerLastContactThreshold: 5 * time.Minute, MinQuorum: 3, ServerStabilizationTime: 1500 * time.Millisecond}
	if err := c.SetAutopilotConfiguration(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	if sent["dead_server_last_contact_threshold"] != "300s" || sent["server_stabilization_time"] != "2s" || sent["min_quorum"] != float64(3) {
		t.Errorf("sent %v", sent)
	}
	if _, ok := sent["last_contact_threshold"]; ok {
		t.Errorf("a zero duration was sent: %v", sent)
	}
	got, err := c.AutopilotConfiguration(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !got.CleanupDeadServers || got.DeadServerLastContactThreshold != 5*time.Minute || got.MinQuorum != 3 {
		t.Errorf("read %+v", got)
	}
}

func TestTransportFailuresAreTyped(t *testing.T) {
	c, err := openbao.New(openbao.Options{Address: "https://127.0.0.1:1", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Init(context.Background(), openbao.InitRequest{})
	var te *openbao.TransportError
	if !errors.As(err, &te) {
		t.Fatalf("error %T %v, want a TransportError", err, err)
	}
}
