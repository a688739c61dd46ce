package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/apply"
	"github.com/openbao/operator/internal/children"
	"github.com/openbao/operator/internal/render"
	"github.com/openbao/operator/internal/values"
)

// missingKindRetry is how soon a cluster whose chart needs an uninstalled
// CRD (Gateway API, Prometheus Operator) looks again.
const missingKindRetry = time.Minute

// childNameTakenRetry is how soon a cluster whose child's name is taken
// by an object of someone else's looks again.
const childNameTakenRetry = time.Minute

// reconcileChildren renders the chart from the pass's input and applies it,
// then prunes what it no longer renders. Its failures make the cluster
// Degraded (see summarizeDegraded).
//
// Errors in the spec are not returned: retrying cannot fix them, and a spec
// change triggers the next reconcile. Errors from the API server are.
func (r *OpenBaoClusterReconciler) reconcileChildren(ctx context.Context, p *pass) error {
	c := p.cluster
	degraded := func(reason, msg string) {
		p.degrade(reason, msg)
		p.record("Warning", reason, "Reconcile", msg)
	}
	objs, reason, err := r.renderChildren(p.input())
	if err != nil {
		degraded(reason, err.Error())
		return nil
	}
	res, err := r.Applier.Apply(ctx, c, objs)
	if taken := (*apply.TakenError)(nil); errors.As(err, &taken) {
		// Nothing was applied. The object in the way is not watched (it
		// lacks the cluster's label), so look again in a while.
		degraded(v1alpha1.ReasonChildNameTaken, taken.Error())
		p.requeueAfter(childNameTakenRetry)
		return nil
	}
	if missing := (*apply.MissingKindError)(nil); errors.As(err, &missing) {
		degraded(v1alpha1.ReasonMissingKind, missing.Error())
		p.requeueAfter(missingKindRetry)
		return nil
	}
	if err != nil {
		degraded(v1alpha1.ReasonApplyFailed, "applying the rendered objects failed; the operator retries: "+apiReason(err))
		return err
	}
	pruned, err := r.Applier.Prune(ctx, c, children.Rendered(), client.MatchingLabels{v1alpha1.LabelCluster: c.Name}, objs)
	if err != nil {
		degraded(v1alpha1.ReasonPruneFailed, "deleting objects no longer rendered failed; the operator retries: "+apiReason(err))
		return err
	}
	p.reconciled = fmt.Sprintf("all %d rendered objects are applied", len(objs))
	if len(res.Applied) > 0 || len(pruned) > 0 {
		log.FromContext(ctx).Info("children reconciled", "applied", res.Applied, "pruned", pruned, "unchanged", res.Unchanged)
		p.record("Normal", "Applied", "Apply", changeNote(res, pruned))
	}
	return nil
}

// renderChildren runs the pure pipeline and classifies its failure.
func (r *OpenBaoClusterReconciler) renderChildren(in values.Input) (objs []*unstructured.Unstructured, reason string, err error) {
	started := time.Now()
	defer func() { renderDuration.Observe(time.Since(started).Seconds()) }()
	cfg, err := values.ConfigFor(in)
	if err != nil {
		return nil, v1alpha1.ReasonRenderFailed, fmt.Errorf("config.hcl cannot be rendered: %w", err)
	}
	vals, err := values.Compute(in, r.Operator, cfg)
	if err != nil {
		return nil, v1alpha1.ReasonInvalidValues, err
	}
	objs, err = r.Renderer.Render(in.Cluster.Namespace, in.Cluster.Name, vals)
	if valuesErr := (*render.ValuesError)(nil); errors.As(err, &valuesErr) {
		return nil, v1alpha1.ReasonInvalidValues, fmt.Errorf("spec.values: %w", err)
	}
	if err != nil {
		return nil, v1alpha1.ReasonRenderFailed, err
	}
	return objs, "", nil
}

func changeNote(res apply.Result, pruned []string) string {
	note := fmt.Sprintf("applied %d objects", len(res.Applied))
	if len(res.Applied) > 0 {
		note += " (" + strings.Join(res.Applied, ", ") + ")"
	}
	if len(pruned) > 0 {
		note += fmt.Sprintf("; pruned %d (%s)", len(pruned), strings.Join(pruned, ", "))
	}
	return note
}
