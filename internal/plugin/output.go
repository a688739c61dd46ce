package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/podstate"
)

// Output formats of every read: the table a person reads, or a document
// a script reads.
const (
	OutputTable = ""
	OutputJSON  = "json"
	OutputYAML  = "yaml"
)

// OutputFormats are the values -o accepts, for its check and completion.
var OutputFormats = []string{OutputJSON, OutputYAML}

// CheckOutputFormat refuses an -o value no read prints.
func CheckOutputFormat(format string) error {
	switch format {
	case OutputTable, OutputJSON, OutputYAML:
		return nil
	}
	return fmt.Errorf("-o %q: want json or yaml, or no -o for the table", format)
}

// Print writes v as JSON or YAML, or calls table for the default format.
func Print(w io.Writer, format string, v any, table func(io.Writer) error) error {
	switch format {
	case OutputJSON:
		out, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("encode JSON: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", out)
		return err
	case OutputYAML:
		out, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode YAML: %w", err)
		}
		_, err = w.Write(out)
		return err
	default:
		return table(w)
	}
}

// StatusView is `status <cluster> -o json|yaml`: what the table shows,
// with times as times.
type StatusView struct {
	Namespace      string                     `json:"namespace"`
	Name           string                     `json:"name"`
	Phase          string                     `json:"phase"`
	CurrentVersion string                     `json:"currentVersion"`
	SpecVersion    string                     `json:"specVersion"`
	ReadyReplicas  int32                      `json:"readyReplicas"`
	Replicas       int32                      `json:"replicas"`
	ActiveServer   string                     `json:"activeServer"`
	Paused         bool                       `json:"paused"`
	RootToken      string                     `json:"rootToken"`
	RecoveryKeys   string                     `json:"recoveryKeys"`
	Certificates   map[string]CertificateView `json:"certificates"`
	Raft           *v1alpha1.RaftStatus       `json:"raft,omitempty"`
	Backup         *v1alpha1.BackupStatus     `json:"backup,omitempty"`
	StepDown       *v1alpha1.StepDownStatus   `json:"stepDown,omitempty"`
	Upgrade        *v1alpha1.UpgradeStatus    `json:"upgrade,omitempty"`
	Servers        []ServerView               `json:"servers"`
	Conditions     []metav1.Condition         `json:"conditions"`
}

// CertificateView is a certificate's expiry, or why it is unknown.
type CertificateView struct {
	NotAfter *time.Time `json:"notAfter,omitempty"`
	Problem  string     `json:"problem,omitempty"`
}

// ServerView is one server's line of the status.
type ServerView struct {
	Name    string `json:"name"`
	Role    string `json:"role"`
	Sealed  string `json:"sealed"`
	Ready   bool   `json:"ready"`
	Raft    string `json:"raft"`
	Healthy *bool  `json:"healthy,omitempty"`
	Lag     *int64 `json:"lag,omitempty"`
	// LastContact is how long before status.raft.observedAt the leader
	// last heard from the server.
	LastContact string `json:"lastContact,omitempty"`
}

// NewStatusView gathers the status of one cluster as data.
func NewStatusView(in StatusInput) StatusView {
	c, st := in.Cluster, in.Cluster.Status
	v := StatusView{Namespace: c.Namespace, Name: c.Name, Phase: string(st.Phase), CurrentVersion: st.CurrentVersion,
		SpecVersion: c.Spec.Version, ReadyReplicas: st.ReadyReplicas, Replicas: c.Spec.Replicas, ActiveServer: st.ActiveLeader,
		Paused: c.Spec.Paused, RootToken: RootTokenState(c, in.Now), RecoveryKeys: RecoveryKeysState(c),
		Certificates: map[string]CertificateView{}, Raft: st.Raft, Backup: st.Backup, StepDown: st.StepDown,
		Upgrade: st.Upgrade, Servers: servers(in), Conditions: st.Conditions}
	for _, what := range []string{"server", "ca"} {
		if expiry, ok := in.Certificates[what]; ok {
			v.Certificates[what] = CertificateView{NotAfter: &expiry}
			continue
		}
		v.Certificates[what] = CertificateView{Problem: orNone(in.CertificateProblems[what])}
	}
	if v.Conditions == nil {
		v.Conditions = []metav1.Condition{}
	}
	return v
}

// servers is one entry per pod, by ordinal: its role and seal state from
// the labels OpenBao's service registration writes, its Raft state from
// status.raft.
func servers(in StatusInput) []ServerView {
	raft := map[string]v1alpha1.RaftServer{}
	leader := ""
	if in.Cluster.Status.Raft != nil {
		leader = in.Cluster.Status.Raft.Leader
		for _, s := range in.Cluster.Status.Raft.Servers {
			raft[s.ID] = s
		}
	}
	// The voters by ordinal, then the read replicas by ordinal.
	pods := append(podstate.NewSnapshot(in.Pods), podstate.NewSnapshot(in.ReadPods)...)
	out := []ServerView{}
	for _, p := range pods {
		v := ServerView{Name: p.Name, Role: labelWord(p, podstate.LabelActive, "active", "standby"),
			Sealed: labelWord(p, podstate.LabelSealed, "true", "false"), Ready: p.Ready, Raft: "-"}
		if s, ok := raft[p.Name]; ok {
			v.Raft, v.Healthy, v.Lag = raftRole(s, leader), &s.Healthy, &s.Lag
			if s.LastContact != nil {
				v.LastContact = s.LastContact.Duration.String()
			}
		}
		out = append(out, v)
	}
	return out
}

// ClusterSummary is one line of `status` without a cluster.
type ClusterSummary struct {
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	Phase        string `json:"phase"`
	RootToken    string `json:"rootToken"`
	RecoveryKeys string `json:"recoveryKeys"`
}

// ClusterList is `status -o json|yaml` without a cluster.
type ClusterList struct {
	Items []ClusterSummary `json:"items"`
}
