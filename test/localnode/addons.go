package localnode

import (
	_ "embed"
	"strings"
)

//go:embed addons.yaml
var addonsTemplate string

// addonManifests are the cluster add-ons: CoreDNS (as non-root on port
// 5353 behind the usual kube-dns Service on 53; no upstream forwarding, so
// nothing leaves this machine) and a default host-path StorageClass served
// by kube-controller-manager's host-path provisioner.
func addonManifests(c Config, corednsImage string) string {
	return strings.NewReplacer("{{coredns_image}}", corednsImage, "{{dns_ip}}", c.DNSIP).Replace(addonsTemplate)
}
