package values

import (
	"fmt"

	"k8s.io/utils/ptr"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/autopilot"
	"github.com/openbao/operator/internal/baoconfig"
)

// AutopilotOverrides reads spec.configuration.raft.autopilot; unset fields
// stay nil and take the operator's defaults.
func AutopilotOverrides(c *v1alpha1.OpenBaoCluster) autopilot.Overrides {
	a := c.Spec.Configuration.Raft.Autopilot
	if a == nil {
		return autopilot.Overrides{}
	}
	var o autopilot.Overrides
	o.CleanupDeadServers = a.CleanupDeadServers
	if a.DeadServerLastContactThreshold != nil {
		o.DeadServerLastContactThreshold = ptr.To(a.DeadServerLastContactThreshold.Duration)
	}
	if a.MinQuorum != nil {
		o.MinQuorum = ptr.To(int(*a.MinQuorum))
	}
	if a.ServerStabilizationTime != nil {
		o.ServerStabilizationTime = ptr.To(a.ServerStabilizationTime.Duration)
	}
	return o
}

// selfInitRequests are the user's self-init requests followed by the one
// that configures autopilot: with self-init the operator holds no token, so
// autopilot is set once, by OpenBao itself, with the steady values.
func selfInitRequests(c *v1alpha1.OpenBaoCluster) ([]baoconfig.InitRequest, error) {
	reqs, err := initRequests(c.Spec.SelfInit.Requests)
	if err != nil {
		return nil, err
	}
	autopilot, err := autopilot.SelfInitRequest(c.Spec.Replicas, AutopilotOverrides(c))
	if err != nil {
		return nil, fmt.Errorf("spec.configuration.raft.autopilot: %w", err)
	}
	return append(reqs, autopilot), nil
}
