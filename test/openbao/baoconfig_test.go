package openbao_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/test/baotest"
	"github.com/openbao/operator/test/testbin"
)

// The golden files of internal/baoconfig are what the operator renders; the
// tests here hold them against OpenBao's own code.

func goldenDir(t *testing.T) string {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "internal", "baoconfig", "testdata")
}

func readGolden(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(goldenDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// runChecker runs bao-config-check on the groups and returns its output and
// whether it accepted them.
func runChecker(t *testing.T, groups ...string) (string, bool) {
	t.Helper()
	checker, err := testbin.Path("bao-config-check")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(checker, groups...).CombinedOutput()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("run %s: %v", checker, err)
	}
	return string(out), err == nil
}

func TestEveryGoldenConfigPassesOpenBaosOwnChecks(t *testing.T) {
	t.Parallel()
	dir := goldenDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.hcl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files in %s (%v)", dir, err)
	}
	for _, file := range files {
		name := filepath.Base(file)
		group := file
		if strings.HasPrefix(name, "selfinit") {
			// pod-0 loads the self-init file beside its config.hcl.
			group = filepath.Join(dir, "static-bootstrap.hcl") + "+" + file
		}
		t.Run(name, func(t *testing.T) {
			if out, ok := runChecker(t, group); !ok {
				t.Errorf("OpenBao rejects %s:\n%s", name, out)
			}
		})
	}
}

func TestConfigCheckerRejectsWhatOpenBaoWouldRefuse(t *testing.T) {
	t.Parallel()
	base := readGolden(t, "static-bootstrap.hcl")
	acme := readGolden(t, "acme.hcl")
	tests := map[string]string{
		// OpenBao opens a cluster listener per tcp listener and fails to bind a second one.
		"two listeners sharing a cluster address": strings.Replace(acme, `"127.0.0.1:8203"`, `":8201"`, 1),
		"an internal listener on the cluster port, whose own port + 1 is taken too": strings.Replace(acme,
			"  address         = \":8202\"\n  cluster_address = \"127.0.0.1:8203\"\n", "  address         = \":8201\"\n", 1),
		"an unknown top-level key":          base + "\nnot_a_key = 1\n",
		"disable_mlock = false":             base + "\ndisable_mlock = false\n",
		"a TLS version that does not exist": strings.Replace(base, `"tls12"`, `"tls14"`, 1),
		"an unknown retry_join key":         strings.Replace(base, "leader_api_addr ", "leader_api_url ", 1),
		"an inline static seal key":         strings.Replace(base, `"file:///etc/bao/unseal/key"`, `"0123456789abcdef0123456789abcdef"`, 1),
		"an unknown log level":              strings.Replace(base, `"info"`, `"verbose"`, 1),
		"an unknown raft key":               strings.Replace(base, "performance_multiplier", "performance_multiplyer", 1),
		"a reconcile interval under update": strings.Replace(base, `autopilot_update_interval    = "1s"`, `autopilot_update_interval    = "5s"`, 1),
		"a self-init name OpenBao refuses":  base + "\n" + `initialize "a.b" {` + "\n" + `request "c" {` + "\noperation = \"update\"\npath = \"sys/x\"\n}\n}\n",
		"two stanzas of one unique kind":    base + "\n" + `service_registration "kubernetes" {}` + "\n",
		"an unknown key in a static seal":   strings.Replace(base, "current_key_id", "current_key_name", 1),
	}
	for name, config := range tests {
		t.Run(name, func(t *testing.T) {
			if config == base || config == acme {
				t.Fatal("the mutation did not apply; the golden file changed shape")
			}
			path := filepath.Join(t.TempDir(), "config.hcl")
			if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, ok := runChecker(t, path); ok {
				t.Errorf("the checker accepted it:\n%s", out)
			}
		})
	}
}

// loopbackConfig remaps the paths and addresses of a golden config into a
// baotest server directory. service_registration is dropped: it needs the
// Kubernetes API and is fatal without it.
func loopbackConfig(t *testing.T, golden string) string {
	t.Helper()
	config := strings.NewReplacer(
		`"/etc/bao/tls/`, `"{{dir}}/`,
		`"file:///etc/bao/unseal/key"`, `"file://{{dir}}/unseal.key"`,
		`":8200"`, `"127.0.0.1:{{api_port}}"`,
		`":8201"`, `"127.0.0.1:{{cluster_port}}"`,
		`"https://bao-0.bao-internal.vault.svc:8200"`, `"https://127.0.0.1:{{api_port}}"`,
		`"/bao/data"`, `"{{dir}}/raft"`,
		"service_registration \"kubernetes\" {\n}\n", "",
	).Replace(golden)
	if strings.Contains(config, "/etc/bao") || strings.Contains(config, "service_registration") {
		t.Fatalf("remapping left pod paths behind:\n%s", config)
	}
	return config
}

func startGolden(t *testing.T, config string, env ...string) *baotest.Server {
	t.Helper()
	return startGoldenWith(t, newTestCerts(t), nil, "node-0", config, env...)
}

// startGoldenWith starts a server with the given certificates, and with the
// given static key when it is not nil (joiners share pod-0's key).
func startGoldenWith(t *testing.T, certs testCerts, key []byte, nodeID, config string, env ...string) *baotest.Server {
	t.Helper()
	files := map[string][]byte{"tls.crt": certs.Cert, "tls.key": certs.Key, "ca.crt": certs.CA}
	if key != nil {
		files["unseal.key"] = key
	}
	return baotest.Start(t, baotest.Options{
		NodeID: nodeID,
		Config: config,
		Files:  files,
		CACert: certs.CA,
		// Node identity comes from the environment, as in the pod.
		Env: append([]string{
			"BAO_API_ADDR=https://127.0.0.1:{{api_port}}",
			"BAO_CLUSTER_ADDR=https://127.0.0.1:{{cluster_port}}",
			"BAO_RAFT_NODE_ID={{node_id}}",
		}, env...),
	})
}

func TestStaticSealGoldenConfigServesHealthOverTLS(t *testing.T) {
	t.Parallel()
	bao := startGolden(t, loopbackConfig(t, readGolden(t, "static-bootstrap.hcl")))

	if status, body := call(t, bao, http.MethodGet, "/v1/sys/health", ""); status != http.StatusNotImplemented {
		t.Fatalf("health before init: %d %s, want 501", status, body)
	}
	if status, _ := call(t, bao, http.MethodPut, "/v1/sys/init", "{}"); status != http.StatusOK {
		t.Fatalf("init: %d", status)
	}
	waitForHealth(t, bao, http.StatusOK)
	if log := bao.Log(); strings.Contains(log, "unknown or unsupported field") {
		t.Errorf("OpenBao warned about the rendered config:\n%s", log)
	}
}

func TestSelfInitGoldenFileInitializesPodZeroOnFirstStart(t *testing.T) {
	t.Parallel()
	config := loopbackConfig(t, readGolden(t, "static-bootstrap.hcl")) + "\n" + readGolden(t, "selfinit.hcl")
	bao := startGolden(t, config, "BAO_ADMIN_PASSWORD=correct horse")

	waitForHealth(t, bao, http.StatusOK)
	status, body := call(t, bao, http.MethodPut, "/v1/auth/userpass/login/admin", `{"password":"correct horse"}`)
	if status != http.StatusOK {
		t.Fatalf("login as the self-init user: %d %s\n--- log ---\n%s", status, body, bao.Log())
	}
	var login struct {
		Auth struct {
			Policies []string `json:"token_policies"`
		} `json:"auth"`
	}
	if err := json.Unmarshal([]byte(body), &login); err != nil || !strings.Contains(strings.Join(login.Auth.Policies, ","), "admin") {
		t.Errorf("login policies %v (%v), want admin", login.Auth.Policies, err)
	}
}

func TestBootstrapGoldenConfigLetsAJoinerJoinPodZero(t *testing.T) {
	t.Parallel()
	golden := readGolden(t, "static-bootstrap.hcl")
	certs := newTestCerts(t)
	leader := startGoldenWith(t, certs, nil, "node-0", loopbackConfig(t, golden))
	if status, _ := call(t, leader, http.MethodPut, "/v1/sys/init", "{}"); status != http.StatusOK {
		t.Fatalf("init: %d", status)
	}
	waitForHealth(t, leader, http.StatusOK)
	key, err := os.ReadFile(filepath.Join(leader.Dir, "unseal.key"))
	if err != nil {
		t.Fatal(err)
	}

	// The joiner's retry_join points at the leader, as every pod's points at
	// pod-0, and verifies it with the CA file.
	joinerConfig := strings.Replace(loopbackConfig(t, golden),
		`leader_api_addr     = "https://127.0.0.1:{{api_port}}"`,
		`leader_api_addr     = "`+leader.Addr+`"`, 1)
	if joinerConfig == loopbackConfig(t, golden) {
		t.Fatal("the leader address did not apply; the golden file changed shape")
	}
	joiner := startGoldenWith(t, certs, key, "node-1", joinerConfig)
	// A standby answers 429 once it has joined and unsealed.
	waitForHealth(t, joiner, http.StatusTooManyRequests)
}

func waitForHealth(t *testing.T, bao *baotest.Server, want int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		status, body := call(t, bao, http.MethodGet, "/v1/sys/health", "")
		if status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("health: still %d %s, want %d\n--- log ---\n%s", status, body, want, bao.Log())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func call(t *testing.T, bao *baotest.Server, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, bao.Addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := bao.Client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var buf strings.Builder
	if _, err := io.Copy(&buf, resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, buf.String()
}
