package localnode

import (
	"fmt"
	"os/exec"
)

// serviceGuardChain rejects what is sent to the Service range and was not
// rewritten to an endpoint on the way (kube-proxy's DNAT runs before the
// filter table sees a packet): a Service with no ready endpoint for a
// moment, or an address no Service holds. Without it such a packet
// follows the host's default route off the machine (a test client saw
// another host answer a TLS handshake), where no test traffic may go.
// Down removes the chain and its jumps with every other owned chain.
const serviceGuardChain = "LOCALNODE-SERVICES"

// guardServiceRange installs the chain and jumps to it from OUTPUT (the
// tests and the control plane on the host) and FORWARD (pods).
func guardServiceRange(c Config) error {
	for _, args := range [][]string{
		{"-N", serviceGuardChain},
		{"-A", serviceGuardChain, "-d", c.ServiceCIDR, "-j", "REJECT"},
		{"-A", "OUTPUT", "-j", serviceGuardChain},
		{"-A", "FORWARD", "-j", serviceGuardChain},
	} {
		cmd := append([]string{"-w", "-t", "filter"}, args...)
		if out, err := exec.Command("iptables", cmd...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables %v: %w: %s", cmd, err, out)
		}
	}
	return nil
}
