package controllers

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openbao/operator/api/v1alpha1"
)

// TestASickReadReplicaCountsApartFromTheVoters: autopilot's verdict on the
// cluster turns unhealthy for a sick non-voter too; the unhealthy servers
// are exported by voter, so OpenBaoRaftUnhealthy can ignore read replicas.
// A cluster whose Raft state is unknown exports none.
func TestASickReadReplicaCountsApartFromTheVoters(t *testing.T) {
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "metrics-ns", Name: "bao"}}
	status := &v1alpha1.OpenBaoClusterStatus{Raft: &v1alpha1.RaftStatus{Healthy: false, Servers: []v1alpha1.RaftServer{
		{ID: "bao-0", Voter: true, Healthy: true}, {ID: "bao-1", Voter: true, Healthy: true},
		{ID: "bao-read-0", Healthy: false}, {ID: "bao-read-1", Healthy: false}}}}
	recordCluster(c, status, 0)
	defer forgetClusterMetrics(c.Namespace, c.Name)
	voters, reads := unhealthyServers(t, c, "true"), unhealthyServers(t, c, "false")
	if voters != 0 || reads != 2 {
		t.Fatalf("unhealthy voters %v, non-voters %v; want 0 and 2", voters, reads)
	}
	status.Raft = nil
	recordCluster(c, status, 0)
	if n := raftUnhealthyServers.DeletePartialMatch(map[string]string{"namespace": c.Namespace, "name": c.Name}); n != 0 {
		t.Fatalf("%d series left without a Raft state, want none", n)
	}
}

func unhealthyServers(t *testing.T, c *v1alpha1.OpenBaoCluster, voter string) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := raftUnhealthyServers.WithLabelValues(c.Namespace, c.Name, voter).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}
