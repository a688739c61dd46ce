package auditlog

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCountTakesEachRequestOnceInItsWindow(t *testing.T) {
	dir := t.TempDir()
	log := `{"stage":"ResponseComplete","verb":"get","requestURI":"/api/v1/namespaces/a/secrets/x","requestReceivedTimestamp":"2026-11-27T10:00:01Z","user":{"username":"op"}}
{"stage":"ResponseStarted","verb":"watch","requestURI":"/api/v1/namespaces/b/pods?watch=true","requestReceivedTimestamp":"2026-11-27T10:00:02Z","user":{"username":"op"}}
{"stage":"ResponseComplete","verb":"watch","requestURI":"/api/v1/namespaces/b/pods?watch=true","requestReceivedTimestamp":"2026-11-27T10:00:02Z","user":{"username":"op"}}
{"stage":"ResponseComplete","verb":"patch","requestURI":"/apis/openbao.org/v1alpha1/namespaces/c/openbaoclusters/bao/status","requestReceivedTimestamp":"2026-11-27T10:00:03Z","user":{"username":"op"}}
{"stage":"ResponseComplete","verb":"get","requestURI":"/api/v1/namespaces/a/secrets/y","requestReceivedTimestamp":"2026-11-27T10:00:04Z","user":{"username":"someone"}}
{"stage":"ResponseComplete","verb":"get","requestURI":"/api/v1/namespaces/a/secrets/z","requestReceivedTimestamp":"2026-11-27T10:00:09Z","user":{"username":"op"}}
`
	path := filepath.Join(dir, "audit.log")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	at := func(s int) time.Time { return time.Date(2026, 11, 27, 10, 0, s, 0, time.UTC) }
	got, err := Count(path, func(e Event) bool { return e.User.Username == "op" }, NormalPath, Span{at(0), at(5)}, Span{at(3), at(10)})
	if err != nil {
		t.Fatal(err)
	}
	want := []map[string]float64{
		{"get /api/v1/namespaces/{ns}/secrets/{name}": 1, "watch /api/v1/namespaces/{ns}/pods": 1,
			"patch /apis/openbao.org/v1alpha1/namespaces/{ns}/openbaoclusters/{name}/status": 1},
		{"patch /apis/openbao.org/v1alpha1/namespaces/{ns}/openbaoclusters/{name}/status": 1, "get /api/v1/namespaces/{ns}/secrets/{name}": 1},
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Errorf("span %d: %v, want %v", i, got[i], want[i])
		}
		for k, v := range want[i] {
			if got[i][k] != v {
				t.Errorf("span %d: %q counted %v, want %v (all: %v)", i, k, got[i][k], v, got[i])
			}
		}
	}
	if !Writes("patch /x") || Writes("get /x") || Writes("watch /x") {
		t.Error("Writes tells reads from writes wrongly")
	}
}
