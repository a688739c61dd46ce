package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OperatorSelector selects the operator's Deployment and pods, as
// config/manager and the chart label them.
var OperatorSelector = map[string]string{"app.kubernetes.io/name": "openbao-operator", "control-plane": "controller-manager"}

// VersionView is `version -o json|yaml`.
type VersionView struct {
	Plugin   string `json:"plugin"`
	Operator string `json:"operator"`
	// Image is the operator's image, and Deployment where it was found.
	Image      string `json:"image,omitempty"`
	Deployment string `json:"deployment,omitempty"`
	// Unknown says why the operator's version could not be read.
	Unknown string `json:"unknown,omitempty"`
}

// Version reads the operator's release from its Deployment in
// operatorNamespace (then in any namespace, for an OLM install), with
// the caller's rights: a caller who may not read it gets "unknown" and
// the reason.
func (c *Commands) Version(ctx context.Context, plugin, operatorNamespace string) VersionView {
	v := VersionView{Plugin: plugin, Operator: "unknown"}
	list := &appsv1.DeploymentList{}
	err := c.Client.List(ctx, list, client.InNamespace(operatorNamespace), client.MatchingLabels(OperatorSelector))
	if err == nil && len(list.Items) == 0 {
		err = c.Client.List(ctx, list, client.MatchingLabels(OperatorSelector))
	}
	switch {
	case err != nil:
		v.Unknown = fmt.Sprintf("cannot read the operator's Deployment: %v", err)
		return v
	case len(list.Items) == 0:
		v.Unknown = "no operator Deployment found (labels app.kubernetes.io/name=openbao-operator, control-plane=controller-manager)"
		return v
	}
	d := list.Items[0]
	v.Deployment = d.Namespace + "/" + d.Name
	v.Operator, v.Image = OperatorVersion(d)
	return v
}

// OperatorVersion is the release a Deployment runs: its
// app.kubernetes.io/version label (the chart's appVersion), else its
// manager image's tag; the image is returned with it.
func OperatorVersion(d appsv1.Deployment) (version, image string) {
	for _, ctr := range d.Spec.Template.Spec.Containers {
		if ctr.Name == "manager" || image == "" {
			image = ctr.Image
		}
	}
	if v := d.Labels["app.kubernetes.io/version"]; v != "" {
		return v, image
	}
	return imageTag(image), image
}

// imageTag is the tag of an image reference, or its digest, or "unknown".
func imageTag(image string) string {
	if _, digest, ok := strings.Cut(image, "@"); ok {
		return digest
	}
	last := image[strings.LastIndex(image, "/")+1:]
	if _, tag, ok := strings.Cut(last, ":"); ok {
		return tag
	}
	return "unknown"
}

// WriteVersion prints the two versions.
func WriteVersion(w io.Writer, v VersionView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "Plugin:\t"+v.Plugin)
	line := v.Operator
	switch {
	case v.Unknown != "":
		line += " (" + v.Unknown + ")"
	default:
		line += " (image " + v.Image + ", Deployment " + v.Deployment + ")"
	}
	fmt.Fprintln(tw, "Operator:\t"+line)
	return tw.Flush()
}
