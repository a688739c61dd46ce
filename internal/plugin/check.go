package plugin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
)

// ClusterWebhookName is the operator's validating webhook of
// OpenBaoClusters (config/webhook and the chart name it so); the API
// server names it in every refusal it passes on.
const ClusterWebhookName = "vopenbaocluster.openbao.org"

// servedResources are the operator's kinds, as the API serves them.
var servedResources = []string{"openbaoclusters", "openbaobackups", "openbaorestores", "openbaotenants"}

// CheckResult is one line of `check`.
type CheckResult struct {
	Check  string `json:"check"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// CheckReport is `check -o json|yaml`.
type CheckReport struct {
	Results []CheckResult `json:"results"`
}

// Failed says whether any check failed.
func (r CheckReport) Failed() bool {
	return slices.ContainsFunc(r.Results, func(c CheckResult) bool { return !c.OK })
}

// Check asks the API server, with the caller's rights, whether it serves
// the operator's kinds and whether the operator's webhook answers: a
// dry-run create of a cluster only the webhook refuses (its name ends in a
// child's suffix, which the CRD's schema allows). Nothing is stored.
func (c *Commands) Check(ctx context.Context) CheckReport {
	report := CheckReport{Results: c.checkServed()}
	probe := &v1alpha1.OpenBaoCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: "kubectl-openbao-check" + v1alpha1.SuffixHeadlessService},
		Spec:       v1alpha1.OpenBaoClusterSpec{Version: "2.4.0"},
	}
	err := c.Client.Create(ctx, probe, client.DryRunAll)
	ok, detail := WebhookVerdict(err, c.Namespace)
	report.Results = append(report.Results, CheckResult{Check: "webhook " + ClusterWebhookName, OK: ok, Detail: detail})
	return report
}

func (c *Commands) checkServed() []CheckResult {
	gv := v1alpha1.GroupVersion.String()
	if c.Kube == nil {
		return []CheckResult{{Check: "CRDs", Detail: "no discovery client"}}
	}
	list, err := c.Kube.Discovery().ServerResourcesForGroupVersion(gv)
	if err != nil {
		return []CheckResult{{Check: "CRDs " + gv, Detail: fmt.Sprintf("the API server does not serve %s: %v", gv, err)}}
	}
	served := map[string]bool{}
	for _, r := range list.APIResources {
		served[r.Name] = true
	}
	var out []CheckResult
	for _, r := range servedResources {
		res := CheckResult{Check: "CRD " + r + "." + v1alpha1.GroupVersion.Group, OK: served[r], Detail: "served as " + gv}
		if !res.OK {
			res.Detail = "not served as " + gv + ": the CRD is not installed or not established"
		}
		out = append(out, res)
	}
	return out
}

// WebhookVerdict reads the answer to the dry-run create of a cluster only
// the webhook refuses. Only the webhook's own refusal counts as OK: an
// acceptance means no webhook is registered for OpenBaoClusters, a
// refusal without the webhook's name came from the CRD's schema or from
// RBAC, and "failed calling webhook" means it is registered but down.
func WebhookVerdict(err error, namespace string) (ok bool, detail string) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	switch {
	case err == nil:
		return false, "the API server accepted a cluster the operator's webhook refuses: no validating webhook " +
			"for OpenBaoClusters is registered (ValidatingWebhookConfiguration openbao-operator-validating-webhook)"
	case strings.Contains(msg, `admission webhook "`+ClusterWebhookName+`" denied the request`):
		return true, "answers: it refused a dry-run cluster named like a child, as it should"
	case strings.Contains(msg, "failed calling webhook"):
		return false, "registered but not answering (is the operator running?): " + msg
	case apierrors.IsForbidden(err):
		return false, fmt.Sprintf("cannot tell: the check dry-runs a create of an OpenBaoCluster in namespace %s, "+
			"which you may not do (-n another namespace?): %s", namespace, msg)
	case apierrors.IsInvalid(err):
		return false, "refused by the CRD's schema, not by the webhook (does the CRD match this plugin's release?): " + msg
	}
	return false, "the dry-run create failed: " + msg
}

// WriteChecks prints one line per check.
func WriteChecks(w io.Writer, r CheckReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT\tDETAIL")
	for _, c := range r.Results {
		fmt.Fprintln(tw, joinCells([]any{c.Check, map[bool]string{true: "OK", false: "FAIL"}[c.OK], c.Detail}))
	}
	return tw.Flush()
}
