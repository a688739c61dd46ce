package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/podstate"
)

func serverPod(name string, active, sealed string, ready bool) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if active != "" {
		p.Labels[podstate.LabelActive] = active
	}
	if sealed != "" {
		p.Labels[podstate.LabelSealed] = sealed
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	return p
}

// TestStatusShowsEachServerWithItsRoleSealAndRaftState checks the lines a
// person reads first: which server leads, which is sealed, which is a
// voter and how far behind, when the certificate expires.
func TestStatusShowsEachServerWithItsRoleSealAndRaftState(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "bao"}}
	c.Spec.Replicas, c.Spec.Version = 3, "2.4.0"
	c.Status = v1alpha1.OpenBaoClusterStatus{Phase: v1alpha1.PhaseRunning, CurrentVersion: "2.4.0", ReadyReplicas: 2, ActiveLeader: "bao-0",
		Raft: &v1alpha1.RaftStatus{ObservedAt: metav1.NewTime(now.Add(-3 * time.Minute)), Leader: "bao-0", Healthy: true, FailureTolerance: 1,
			Servers: []v1alpha1.RaftServer{{ID: "bao-0", Voter: true, Healthy: true},
				{ID: "bao-1", Voter: true, Healthy: true, Lag: 2, LastContact: &metav1.Duration{Duration: 30 * time.Millisecond}},
				{ID: "bao-2", Voter: false, Healthy: false, Lag: 900}}},
		Backup:     &v1alpha1.BackupStatus{LastBackupTime: &metav1.Time{Time: now.Add(-5 * time.Hour)}, LastBackupName: "bao-schedule-1", LastBackupSize: 4096},
		Conditions: []metav1.Condition{{Type: "Available", Status: metav1.ConditionTrue, Reason: "ActiveServerReady", Message: "bao-0 is active"}},
	}
	pods := []corev1.Pod{serverPod("bao-2", "false", "true", false), serverPod("bao-0", "true", "false", true), serverPod("bao-1", "false", "false", true)}
	var out bytes.Buffer
	err := WriteStatus(&out, StatusInput{Cluster: c, Pods: pods, Now: now,
		Certificates: map[string]time.Time{"server": now.Add(72 * time.Hour)}, CertificateProblems: map[string]string{"ca": "cannot read Secret bao-tls-ca: forbidden"}})
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"Phase:", "Running", "Ready:", "2/3", "failure tolerance 1 (read 3m ago)",
		"expires 2026-03-04T12:00:00Z (in 3d)", "unknown: cannot read Secret bao-tls-ca: forbidden",
		"bao-schedule-1, 4096 bytes",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
	lines := map[string][]string{}
	for _, l := range strings.Split(got, "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "bao-") {
			lines[f[0]] = f
		}
	}
	for name, want := range map[string]string{
		"bao-0": "bao-0 active false true leader true 0 -",
		"bao-1": "bao-1 standby false true voter true 2 30ms",
		"bao-2": "bao-2 standby true false non-voter false 900 -",
	} {
		if strings.Join(lines[name], " ") != want {
			t.Errorf("server line of %s: got %q, want %q", name, strings.Join(lines[name], " "), want)
		}
	}
}

// TestStatusListsTheReadReplicasAfterTheVoters: a read replica shows as a
// standby and a Raft non-voter, on its own line after the voters.
func TestStatusListsTheReadReplicasAfterTheVoters(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "bao"}}
	c.Spec.Replicas, c.Spec.Version = 1, "2.4.0"
	c.Status = v1alpha1.OpenBaoClusterStatus{Phase: v1alpha1.PhaseRunning, Raft: &v1alpha1.RaftStatus{ObservedAt: metav1.NewTime(now),
		Leader: "bao-0", Healthy: true, Servers: []v1alpha1.RaftServer{{ID: "bao-0", Voter: true, Healthy: true},
			{ID: "bao-read-0", Healthy: true, Lag: 1, LastContact: &metav1.Duration{Duration: 5 * time.Millisecond}}}}}
	var out bytes.Buffer
	if err := WriteStatus(&out, StatusInput{Cluster: c, Pods: []corev1.Pod{serverPod("bao-0", "true", "false", true)},
		ReadPods: []corev1.Pod{serverPod("bao-read-0", "false", "false", true)}, Now: now}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "bao-") {
			names = append(names, strings.Join(f, " "))
		}
	}
	want := []string{"bao-0 active false true leader true 0 -", "bao-read-0 standby false true non-voter true 1 5ms"}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Fatalf("server lines %q, want %q", names, want)
	}
}

func TestCertificateExpiryReadsNotAfter(t *testing.T) {
	notAfter := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	got, err := CertificateExpiry(selfSigned(t, notAfter))
	if err != nil || !got.Equal(notAfter) {
		t.Fatalf("CertificateExpiry = %v, %v; want %v", got, err, notAfter)
	}
	if _, err := CertificateExpiry([]byte("not pem")); err == nil {
		t.Fatal("no error for bytes that are no certificate")
	}
}

// TestStatusSaysWhichClustersStillHoldARootToken: the list names each
// cluster whose root token is stored, and those whose token was revoked.
func TestStatusSaysWhichClustersStillHoldARootToken(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cluster := func(ns, name string, rt *v1alpha1.RootTokenStatus, policy v1alpha1.RootTokenPolicy) v1alpha1.OpenBaoCluster {
		c := v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		c.Spec.RootToken = &v1alpha1.RootTokenSpec{Policy: policy}
		c.Status.Initialized, c.Status.RootToken = true, rt
		return c
	}
	revoked := metav1.NewTime(now.Add(-2 * time.Hour))
	self := cluster("team", "selfinit", nil, v1alpha1.RootTokenKeep)
	self.Status.SelfInitialized = true
	var out bytes.Buffer
	err := WriteRootTokens(&out, []v1alpha1.OpenBaoCluster{
		cluster("prod", "vault", &v1alpha1.RootTokenStatus{RevokedAt: &revoked, RecoveryShares: 3, RecoveryThreshold: 2}, v1alpha1.RootTokenRevoke),
		cluster("dev", "bao", &v1alpha1.RootTokenStatus{Held: true}, v1alpha1.RootTokenKeep),
		cluster("prod", "new", &v1alpha1.RootTokenStatus{Held: true, RecoveryShares: 1, RecoveryThreshold: 1}, v1alpha1.RootTokenRevoke),
		self,
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for i, want := range []string{
		"dev bao - HELD in Secret bao-root-token (policy Keep) none",
		"prod new - HELD in Secret new-root-token, to be revoked (policy Revoke) 1 of 1 in Secret new-recovery-keys",
		"prod vault - revoked 2h ago 2 of 3 in Secret vault-recovery-keys",
		"team selfinit - none (self-init: the operator never held one) none",
	} {
		if got := strings.Join(strings.Fields(lines[i+1]), " "); got != want {
			t.Errorf("line %d: got %q, want %q", i+1, got, want)
		}
	}
}

// TestStatusAsJSONHoldsWhatTheTableShows: -o json carries each server's
// role, seal and Raft state and the certificates, as data.
func TestStatusAsJSONHoldsWhatTheTableShows(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "bao"}}
	c.Status.Raft = &v1alpha1.RaftStatus{Leader: "bao-0", Servers: []v1alpha1.RaftServer{{ID: "bao-0", Voter: true, Healthy: true}, {ID: "bao-1", Lag: 7}}}
	in := StatusInput{Cluster: c, Now: now, Pods: []corev1.Pod{serverPod("bao-1", "false", "true", false), serverPod("bao-0", "true", "false", true)},
		Certificates: map[string]time.Time{"server": now.Add(time.Hour)}, CertificateProblems: map[string]string{"ca": "not shown"}}
	var out bytes.Buffer
	if err := Print(&out, OutputJSON, NewStatusView(in), nil); err != nil {
		t.Fatal(err)
	}
	var got StatusView
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v in:\n%s", err, out.String())
	}
	servers := fmt.Sprint(got.Servers[0].Name, got.Servers[0].Role, got.Servers[0].Raft, *got.Servers[0].Healthy, " ",
		got.Servers[1].Name, got.Servers[1].Sealed, got.Servers[1].Raft, *got.Servers[1].Lag)
	if servers != "bao-0activeleadertrue bao-1truenon-voter7" || got.Namespace != "prod" ||
		!got.Certificates["server"].NotAfter.Equal(now.Add(time.Hour)) || got.Certificates["ca"].Problem != "not shown" {
		t.Errorf("status JSON: servers %q, certificates %+v:\n%s", servers, got.Certificates, out.String())
	}
}

// TestStatusTakesCertificateExpiryFromStatusNotFromSecrets: the TLS Secrets
// hold private keys beside the certificates, so status reads the expiry the
// operator wrote into status.tls and asks for no Secret (the fixture
// records every get and list); without status.tls it says why.
func TestStatusTakesCertificateExpiryFromStatusNotFromSecrets(t *testing.T) {
	cert, _ := testServerCert(t, "localhost")
	cmds, _, _, read := baoEnvFixture(t, cert)
	ctx := context.Background()
	var before bytes.Buffer
	if err := cmds.Status(ctx, "bao", OutputTable, &before); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(before.String(), "not in status.tls yet") {
		t.Errorf("without status.tls, status should say the expiry is not reported yet:\n%s", before.String())
	}

	cluster := &v1alpha1.OpenBaoCluster{}
	if err := cmds.Client.Get(ctx, client.ObjectKey{Namespace: "prod", Name: "bao"}, cluster); err != nil {
		t.Fatal(err)
	}
	server, ca := metav1.NewTime(time.Now().Add(48*time.Hour).Truncate(time.Second)), metav1.NewTime(time.Now().Add(9000*time.Hour).Truncate(time.Second))
	cluster.Status.TLS = &v1alpha1.TLSStatus{ServerNotAfter: &server, CANotAfter: &ca}
	if err := cmds.Client.Update(ctx, cluster); err != nil { // the fake keeps status on Update
		t.Fatal(err)
	}
	*read = nil
	var out bytes.Buffer
	if err := cmds.Status(ctx, "bao", OutputJSON, &out); err != nil {
		t.Fatal(err)
	}
	var got StatusView
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	if s, c := got.Certificates["server"].NotAfter, got.Certificates["ca"].NotAfter; s == nil || c == nil || !s.Equal(server.Time) || !c.Equal(ca.Time) {
		t.Errorf("certificates %+v, want server %s and ca %s from status.tls", got.Certificates, server, ca)
	}
	for _, r := range *read {
		if strings.HasPrefix(r, "Secret") {
			t.Errorf("status read %s; it must read no Secret", r)
		}
	}
}
