package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
)

// ErrNotAStandby: promote on a cluster without spec.standby.
var ErrNotAStandby = errors.New("not a standby")

// PromotionPlan is what promote says before it asks, and whether there is
// anything left to do.
type PromotionPlan struct {
	// Done: the operator already recorded the promotion; nothing is asked.
	Done bool
	// Requested: spec.standby.promote is already true, not yet recorded.
	Requested    bool
	Confirmation string
}

// PlanPromotion decides what promote does to the cluster: refuse a cluster
// that is not a standby, do nothing on one already promoted, else say
// what promotion means, in the terms of the cluster's status: the source
// it stops following, the snapshot it serves and how far that trails the
// source's newest, a restore the operator waits for first, and that the
// source must be fenced.
func PlanPromotion(c *v1alpha1.OpenBaoCluster) (PromotionPlan, error) {
	id := c.Namespace + "/" + c.Name
	if c.Spec.Standby == nil {
		return PromotionPlan{}, fmt.Errorf("%w: OpenBaoCluster %s has no spec.standby; only a standby created with it can be promoted", ErrNotAStandby, id)
	}
	st := c.Status.Standby
	if st != nil && st.PromotedAt != nil {
		return PromotionPlan{Done: true}, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "This promotes the standby OpenBaoCluster %s, once and for good:\n", id)
	fmt.Fprintf(&b, "  it stops following %s, restores nothing further, opens its client Service to writes,\n", standbySource(c))
	b.WriteString("  and takes its own backups under spec.backup (never under its source's prefix).\n")
	switch {
	case st == nil || st.ServedKey == "":
		b.WriteString("It serves no snapshot of its source yet (status.standby.servedKey is empty).\n")
	default:
		fmt.Fprintf(&b, "  it serves: %s", st.ServedKey)
		if st.ServedTakenAt != nil {
			fmt.Fprintf(&b, ", taken %s", st.ServedTakenAt.UTC().Format(time.RFC3339))
		}
		if st.NewestKey != "" && st.NewestKey != st.ServedKey {
			fmt.Fprintf(&b, "; the source's newest is %s (%d s newer)", st.NewestKey, st.LagSeconds)
		}
		b.WriteString("\n")
	}
	if st != nil && st.Restore != "" && st.RestoreKey != st.ServedKey {
		fmt.Fprintf(&b, "The restore %s of %s may still run: the operator promotes once it ended.\n", st.Restore, st.RestoreKey)
	}
	b.WriteString("Writes the source took after the served snapshot are NOT here. If the source may still run, fence it first " +
		"(spec.paused: true, or scale it to 0): two clusters taking writes split the data for good.\n")
	return PromotionPlan{Requested: c.Spec.Standby.Promote, Confirmation: b.String()}, nil
}

func standbySource(c *v1alpha1.OpenBaoCluster) string {
	if c.Spec.Bootstrap == nil || c.Spec.Bootstrap.FromBackup == nil {
		return "its source"
	}
	fb := c.Spec.Bootstrap.FromBackup
	source := fb.SourceCluster
	if source == "" {
		source = c.Name
	}
	if p := fb.Target.PathPrefix; p != "" {
		return fmt.Sprintf("the snapshots of %s under %s", source, p)
	}
	return "the snapshots of " + source
}

// PlanPromotion reads the cluster and plans (PlanPromotion).
func (c *Commands) PlanPromotion(ctx context.Context, name string) (PromotionPlan, error) {
	cluster, err := c.cluster(ctx, name)
	if err != nil {
		return PromotionPlan{}, err
	}
	return PlanPromotion(cluster)
}

// RequestPromotion writes spec.standby.promote: true, and nothing else,
// with a merge patch. The API refuses taking it back.
func (c *Commands) RequestPromotion(ctx context.Context, name string) error {
	cluster := &v1alpha1.OpenBaoCluster{}
	cluster.Namespace, cluster.Name = c.Namespace, name
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"standby":{"promote":true}}}`))
	if err := c.Client.Patch(ctx, cluster, patch); err != nil {
		return fmt.Errorf("set spec.standby.promote of %s: %w", name, err)
	}
	return nil
}

// PromotionDone says the operator recorded the promotion: it stopped
// following and opened the client Service.
func PromotionDone(c *v1alpha1.OpenBaoCluster) bool {
	return c.Status.Standby != nil && c.Status.Standby.PromotedAt != nil
}

func (c *cli) promoteCommand() *cobra.Command {
	var w waitFlags
	var yes bool
	cmd := c.clusterCommand("promote", "Promote a standby cluster (spec.standby.promote): it stops following its source and "+
		"takes writes, after saying what it serves",
		func(ctx context.Context, cmds *Commands, cluster string) error {
			plan, err := cmds.PlanPromotion(ctx, cluster)
			if err != nil {
				return err
			}
			if plan.Done {
				fmt.Fprintf(c.streams.Out, "openbaocluster %s/%s is already promoted\n", cmds.Namespace, cluster)
				return nil
			}
			if !plan.Requested {
				fmt.Fprint(c.streams.ErrOut, plan.Confirmation)
				if err := Confirm(yes, c.isTerminal(c.streams.In), c.streams.In, c.streams.ErrOut); err != nil {
					return err
				}
				if err := cmds.RequestPromotion(ctx, cluster); err != nil {
					return err
				}
			}
			fmt.Fprintf(c.streams.Out, "openbaocluster %s/%s: spec.standby.promote=true; the operator stops following, "+
				"then opens the client Service (kubectl openbao status %s)\n", cmds.Namespace, cluster, cluster)
			if !w.wait {
				return nil
			}
			if err := cmds.WaitFor(ctx, cluster, "status.standby.promotedAt", w.timeout, PromotionDone); err != nil {
				return err
			}
			fmt.Fprintf(c.streams.Out, "openbaocluster %s/%s promoted: it takes writes\n", cmds.Namespace, cluster)
			return nil
		})
	cmd.Long = "promote sets spec.standby.promote: true on a standby cluster, which the API does not let anyone take back. " +
		"It first says which snapshot the standby serves and how far it trails its source, and asks y/N; off a terminal it " +
		"needs --yes. Fence the source first if it may still run (docs/operate.md, Disaster recovery standby)."
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask; needed when stdin is not a terminal")
	return w.add(cmd, "the operator recorded the promotion (status.standby.promotedAt)", 10*time.Minute)
}
