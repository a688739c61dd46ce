package openbao_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/internal/baoconfig"
	"github.com/openbao/operator/internal/openbao"
)

// TestARemovedServerAnswersClientsWithTheLeadersData: a scale-down takes a
// server out of the Raft configuration before its pod goes, and the pod
// stays in the client Service until its deletion reaches kube-proxy (a
// second or two). OpenBao 2.4.0's removed server keeps forwarding each
// request to the active one, so a read there answers the cluster's current
// data, never its own store's, which no longer follows. (A server that
// serves reads itself, as newer OpenBao's standbys may, would fail this.)
func TestARemovedServerAnswersClientsWithTheLeadersData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := formCluster(t, baoconfig.Timers{}, nil)
	root := make([]openbao.Client, len(f.nodes))
	for i, n := range f.nodes {
		root[i] = baoClient(t, n, f.certs.CA, f.token)
	}
	leader := activeNode(t, root)
	gone := (leader + 1) % 3
	if err := root[leader].RemovePeer(ctx, fmt.Sprintf("node-%d", gone)); err != nil {
		t.Fatal(err)
	}
	removedAt, reads := time.Now(), 0
	for ; time.Since(removedAt) < 5*time.Second; reads++ {
		name := fmt.Sprintf("after-removal-%d", reads)
		if code, body := callToken(t, f.nodes[leader], http.MethodPut, "/v1/sys/policies/acl/"+name, f.token,
			`{"policy":"path \"x\" {capabilities=[\"read\"]}"}`); code/100 != 2 {
			t.Fatalf("write %s to the leader: HTTP %d %s", name, code, body)
		}
		code, body := callToken(t, f.nodes[gone], http.MethodGet, "/v1/sys/policies/acl/"+name, f.token, "")
		if code != http.StatusOK || !strings.Contains(body, name) {
			t.Errorf("%.2fs after its removal, the removed server answered a read of %s, written to the leader just before: HTTP %d %.200s",
				time.Since(removedAt).Seconds(), name, code, strings.TrimSpace(body))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the removed server answered %d reads in the 5 s after its removal, each with the leader's data", reads)
}
