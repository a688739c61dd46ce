package values

import (
	"fmt"

	"k8s.io/utils/ptr"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/autopilot"
	"github.com/openbao/operator/internal/baoconfig"
	"github.com/openbao/operator/internal/identity"
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

// selfInitRequests are the user's self-init requests followed by the ones
// that configure autopilot and, given the service-account issuer, the
// operator's own identity: with self-init the operator holds no root
// token, so OpenBao sets them up itself, once.
func selfInitRequests(c *v1alpha1.OpenBaoCluster, issuer *identity.Issuer) ([]baoconfig.InitRequest, error) {
	reqs, err := initRequests(c.Spec.SelfInit.Requests)
	if err != nil {
		return nil, err
	}
	autopilot, err := autopilot.SelfInitRequest(c.Spec.Replicas, AutopilotOverrides(c))
	if err != nil {
		return nil, fmt.Errorf("spec.configuration.raft.autopilot: %w", err)
	}
	reqs = append(reqs, autopilot)
	if issuer != nil {
		reqs = append(reqs, identity.Requests(c, *issuer)...)
	}
	return reqs, nil
}
