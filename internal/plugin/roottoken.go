package plugin

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
)

// RootTokenState says, from the cluster's status alone, whether a root
// token of the cluster is stored: HELD (Secret <cluster>-root-token
// exists), revoked, none (self-init), or unknown (not initialized, or an
// operator that does not report it yet).
func RootTokenState(c *v1alpha1.OpenBaoCluster, now time.Time) string {
	st := c.Status
	rt := st.RootToken
	switch {
	case st.SelfInitialized:
		return "none (self-init: the operator never held one)"
	case !st.Initialized:
		return "- (not initialized)"
	case rt == nil:
		return "unknown (not reported by the operator yet)"
	case rt.Held && c.RootTokenPolicyOf() == v1alpha1.RootTokenRevoke:
		return "HELD in Secret " + c.RootTokenSecretName() + ", to be revoked (policy Revoke)"
	case rt.Held:
		return "HELD in Secret " + c.RootTokenSecretName() + " (policy Keep)"
	case rt.RevokedAt != nil:
		return fmt.Sprintf("revoked %s ago", ago(now, rt.RevokedAt.Time))
	}
	return "none stored (Secret " + c.RootTokenSecretName() + " deleted)"
}

// RecoveryKeysState says which encrypted recovery key shares are stored.
func RecoveryKeysState(c *v1alpha1.OpenBaoCluster) string {
	rt := c.Status.RootToken
	if rt == nil || rt.RecoveryShares == 0 {
		return "none"
	}
	return fmt.Sprintf("%d of %d in Secret %s", rt.RecoveryThreshold, rt.RecoveryShares, c.RecoveryKeysSecretName())
}

// Summaries are the lines of `status` without a cluster, by namespace
// and name.
func Summaries(clusters []v1alpha1.OpenBaoCluster, now time.Time) ClusterList {
	sort.Slice(clusters, func(i, j int) bool {
		return clusters[i].Namespace+"/"+clusters[i].Name < clusters[j].Namespace+"/"+clusters[j].Name
	})
	out := ClusterList{Items: []ClusterSummary{}}
	for i := range clusters {
		c := &clusters[i]
		out.Items = append(out.Items, ClusterSummary{Namespace: c.Namespace, Name: c.Name, Phase: string(c.Status.Phase),
			RootToken: RootTokenState(c, now), RecoveryKeys: RecoveryKeysState(c)})
	}
	return out
}

// WriteRootTokens prints one line per cluster: which still hold a root
// token, and their recovery keys.
func WriteRootTokens(w io.Writer, clusters []v1alpha1.OpenBaoCluster, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tCLUSTER\tPHASE\tROOT TOKEN\tRECOVERY KEYS")
	for _, c := range Summaries(clusters, now).Items {
		fmt.Fprintln(tw, joinCells([]any{c.Namespace, c.Name, orNone(c.Phase), c.RootToken, c.RecoveryKeys}))
	}
	return tw.Flush()
}

// ListClusters reads every cluster of the namespace (of all namespaces
// when Namespace is empty).
func (c *Commands) ListClusters(ctx context.Context) ([]v1alpha1.OpenBaoCluster, error) {
	list := &v1alpha1.OpenBaoClusterList{}
	var opts []client.ListOption
	if c.Namespace != "" {
		opts = append(opts, client.InNamespace(c.Namespace))
	}
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("list OpenBaoClusters: %w", err)
	}
	return list.Items, nil
}

// StatusAll prints every cluster of the namespace (all namespaces when
// Namespace is empty) with its root token's state, in the format.
func (c *Commands) StatusAll(ctx context.Context, format string, w io.Writer) error {
	clusters, err := c.ListClusters(ctx)
	if err != nil {
		return err
	}
	now := c.Now()
	return Print(w, format, Summaries(clusters, now), func(w io.Writer) error { return WriteRootTokens(w, clusters, now) })
}
