package controllers

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/openbao/openbaofake"
	"github.com/openbao/operator/internal/podstate"
)

// servers are fake OpenBao servers of cluster "moved", reached by the
// name a client verifies: the client Service's or a pod's. Each records
// the tokens of the clients made for it.
type servers struct {
	c       *v1alpha1.OpenBaoCluster
	service *openbaofake.Client
	pods    [3]*openbaofake.Client
	tokens  map[*openbaofake.Client][]string
	dialled []string
}

func newServers(c *v1alpha1.OpenBaoCluster) *servers {
	s := &servers{c: c, service: &openbaofake.Client{}, tokens: map[*openbaofake.Client][]string{}}
	for i := range s.pods {
		s.pods[i] = &openbaofake.Client{}
	}
	return s
}

func (s *servers) factory(o openbao.Options) (openbao.Client, error) {
	s.dialled = append(s.dialled, o.Address)
	server := s.service
	for i, pod := range s.pods {
		if o.ServerName == s.c.PodDNSName(i) {
			server = pod
		}
	}
	if o.ServerName != s.c.ClientServiceDNSName() && server == s.service {
		return nil, fmt.Errorf("no server is named %s", o.ServerName)
	}
	if !o.Token.IsZero() {
		s.tokens[server] = append(s.tokens[server], o.Token.Reveal())
	}
	return server, nil
}

// TestTheOperatorsTokenGoesOnlyToItsOwnConfirmedActiveServer: a request
// of the operator's that carries a token (here the source's token a
// cluster formed from a backup uses to bind its identity) goes to the
// server the client Service's server names active, only when that is one
// of this cluster's and says itself that it is active. A standby of a
// cluster restored from another's snapshot names the source's active
// server until the restore ends; a token sent to it would be forwarded
// there.
func TestTheOperatorsTokenGoesOnlyToItsOwnConfirmedActiveServer(t *testing.T) {
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: "moved", Namespace: "ns"}}
	source := "https://bao-0.bao-internal.ns.svc:8200"
	standbyOf := func(address string) openbao.Leader { return openbao.Leader{HAEnabled: true, LeaderAddress: address} }
	active := openbao.Leader{HAEnabled: true, IsSelf: true, LeaderAddress: c.PodAPIAddress(0)}
	pods := podstate.Snapshot{{Name: "moved-0", Ordinal: 0, IP: "10.0.0.10"}, {Name: "moved-1", Ordinal: 1, IP: "10.0.0.11"}}
	for _, tc := range []struct {
		name string
		// service is what the server the client Service reaches says;
		// pod0, pod2 what moved-0 and moved-2 say.
		service, pod0, pod2 openbao.Leader
		// writtenAt is the server the write lands on; "" when none.
		writtenAt string
		err       error
	}{
		{"the Service reaches the active server", active, active, openbao.Leader{}, "moved-0", nil},
		{"the Service reaches a standby naming its cluster's active server", standbyOf(c.PodAPIAddress(0)), active, openbao.Leader{}, "moved-0", nil},
		{"the Service reaches a standby naming the source's active server", standbyOf(source), active, openbao.Leader{}, "", errNoOwnActiveServer},
		{"no server is active", standbyOf(""), standbyOf(""), openbao.Leader{}, "", errNoOwnActiveServer},
		{"the server named active is a standby naming the source's", standbyOf(c.PodAPIAddress(2)), active, standbyOf(source), "", errNoOwnActiveServer},
		{"the named server is one past the pods listed (dialled by name)", standbyOf(c.PodAPIAddress(2)), standbyOf(c.PodAPIAddress(2)),
			openbao.Leader{HAEnabled: true, IsSelf: true, LeaderAddress: c.PodAPIAddress(2)}, "moved-2", nil},
		{"storage without HA: the one server", openbao.Leader{}, openbao.Leader{}, openbao.Leader{}, "service", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServers(c)
			s.service.LeaderAnswer, s.pods[0].LeaderAnswer, s.pods[2].LeaderAnswer = tc.service, tc.pod0, tc.pod2
			r := &OpenBaoClusterReconciler{OpenBao: s.factory}
			p := &pass{cluster: c, servers: pods}
			err := r.revokeSelf(context.Background(), p, openbao.NewToken("s.source-token"))
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			written := map[string]*openbaofake.Client{"service": s.service, "moved-0": s.pods[0], "moved-1": s.pods[1], "moved-2": s.pods[2]}
			for name, server := range written {
				want := 0
				if name == tc.writtenAt {
					want = 1
				}
				if got := server.CallCount("Write"); got != want {
					t.Errorf("%s got %d writes, want %d (dialled %v)", name, got, want, s.dialled)
				}
				if name != tc.writtenAt && len(s.tokens[server]) > 0 {
					t.Errorf("%s was handed the token", name)
				}
			}
			if tc.writtenAt == "moved-0" && s.dialled[len(s.dialled)-1] != "https://10.0.0.10:8200" {
				t.Errorf("the write went to %s, want moved-0's pod address", s.dialled[len(s.dialled)-1])
			}
		})
	}
}

// TestAStepDownGoesOnlyToAServerThatSaysItIsActive: the pod taken for
// active (its label, the pass's view) gets the step-down and the token
// only once its server says it is active; a standby would forward it to
// the server its data names, another cluster's during a restore of that
// cluster's snapshot.
func TestAStepDownGoesOnlyToAServerThatSaysItIsActive(t *testing.T) {
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Name: "moved", Namespace: "ns"}}
	c.Spec.Upgrade.TokenSecretRef = &v1alpha1.SecretKeyRef{Name: "upgrade-token"}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "upgrade-token", Namespace: "ns"},
		Data: map[string][]byte{v1alpha1.DefaultTokenKey: []byte("s.upgrade")}}
	pods := podstate.Snapshot{{Name: "moved-0", Ordinal: 0, IP: "10.0.0.10"}, {Name: "moved-1", Ordinal: 1, IP: "10.0.0.11"}}
	for name, tc := range map[string]struct {
		says      openbao.Leader
		steppedAt int
	}{
		"it says it is active":                       {openbao.Leader{HAEnabled: true, IsSelf: true, LeaderAddress: c.PodAPIAddress(1)}, 1},
		"it stepped down since":                      {openbao.Leader{HAEnabled: true, LeaderAddress: c.PodAPIAddress(0)}, -1},
		"it names the source of a restored snapshot": {openbao.Leader{HAEnabled: true, LeaderAddress: "https://bao-0.bao-internal.ns.svc:8200"}, -1},
	} {
		t.Run(name, func(t *testing.T) {
			s := newServers(c)
			s.pods[1].LeaderAnswer = tc.says
			k := (&tokenRequests{}).client(t, secret)
			r := &OpenBaoClusterReconciler{Client: k, APIReader: k, OpenBao: s.factory}
			p := &pass{cluster: c, status: &c.Status, servers: pods}
			err := r.stepDown(context.Background(), p, "moved-1", "test")
			if (tc.steppedAt < 0) != errors.Is(err, errNoOwnActiveServer) {
				t.Fatalf("error %v", err)
			}
			for i, server := range s.pods {
				want := 0
				if i == tc.steppedAt {
					want = 1
				}
				if got := server.CallCount("StepDown"); got != want {
					t.Errorf("moved-%d got %d step-downs, want %d", i, got, want)
				}
				if i != tc.steppedAt && len(s.tokens[server]) > 0 {
					t.Errorf("moved-%d was handed the token", i)
				}
			}
		})
	}
}
