package upgrade

import (
	"fmt"
	"strings"

	"golang.org/x/mod/semver"

	"github.com/openbao/operator/api/v1alpha1"
)

// core is a version's X.Y.Z as semver with a leading v, or "" when it is
// not a version. Pre-release and build suffixes are dropped: an image
// rebuilt from the same release (2.4.0-<hash>) is neither an upgrade nor a
// downgrade of it.
func core(version string) string {
	v := "v" + strings.TrimPrefix(version, "v")
	if !semver.IsValid(v) {
		return ""
	}
	c := semver.Canonical(v)
	if i := strings.IndexAny(c, "-+"); i >= 0 {
		c = c[:i]
	}
	return c
}

// IsDowngrade says whether to names an older release than from. An unknown
// from (the servers never reported one) is not a downgrade.
func IsDowngrade(from, to string) bool {
	f, t := core(from), core(to)
	return f != "" && t != "" && semver.Compare(t, f) < 0
}

// newer returns the newer of two versions; a, when they name the same
// release or b is not a version.
func newer(a, b string) string {
	if core(b) == "" || (core(a) != "" && semver.Compare(core(b), core(a)) <= 0) {
		return a
	}
	return b
}

// Reference is the version a change of spec.version is judged against:
// the newer of status.currentVersion and status.highestVersion. During a
// rollout currentVersion is empty (the servers run two versions, or one
// is not Ready), while highestVersion still holds the newest release any
// of them ran: a target older than that would take a server back over
// data a newer release wrote. The admission webhook and the rollout's
// preflight both judge by it, through VersionRefused.
func Reference(current, highest string) string {
	if core(current) == "" {
		return highest
	}
	return newer(current, highest)
}

// HighestVersion returns status.highestVersion after an observation: the
// newest release any server has reported (reported: each pod's version,
// "" when it reports none) since the last rollout completed. Once the
// cluster is settled (no rollout runs or is due) and every server reports
// one version, it is that version: an allowed downgrade, once complete,
// lowers it. Otherwise it only rises, so that a server that ran a newer
// release mid-rollout keeps counting after its pod restarted or the
// rollout started over.
func HighestVersion(prev, current string, settled bool, reported []string) string {
	if settled && core(current) != "" {
		return current
	}
	out := newer(prev, current)
	for _, v := range reported {
		out = newer(out, v)
	}
	if core(out) == "" {
		return ""
	}
	return out
}

// cloudSeals are the seals OpenBao 2.7 removed from the server binary in
// favour of external KMS plugins, which the operator does not install.
var cloudSeals = map[v1alpha1.UnsealType]bool{
	v1alpha1.UnsealAWSKMS: true, v1alpha1.UnsealGCPCKMS: true, v1alpha1.UnsealAzureKeyVault: true,
}

// Incompatible says why the operator knows the target release cannot run
// the cluster as specified; "" when it knows of no reason. The table is
// docs/operate.md, "OpenBao versions"; only 2.4.0 is tested here.
func Incompatible(to string, seal v1alpha1.UnsealType) string {
	t := core(to)
	if t == "" {
		return fmt.Sprintf("spec.version %q is not a semantic version X.Y.Z", to)
	}
	if semver.Compare(t, "v2.4.0") < 0 {
		return fmt.Sprintf("OpenBao %s has no static seal and no self-init as the operator renders them: use 2.4.0 or later", to)
	}
	if semver.Compare(t, "v2.7.0") >= 0 && cloudSeals[seal] {
		return fmt.Sprintf("OpenBao %s no longer builds the %s seal in; it runs as an external KMS plugin, which the operator does not install. Stay on 2.6 or earlier", to, seal)
	}
	return ""
}

// StandbysForwardEveryRequest says whether the standbys of version
// forward every client request to the active server (releases before
// StandbyReadsVersion), so that any of them answers as the active server
// would: the client Service may then route to them. From
// StandbyReadsVersion a standby answers reads from its own store by
// default, which trails the active server's (and a server a scale-down
// took out of Raft stops following it); an unknown version counts as one
// that may.
func StandbysForwardEveryRequest(version string) bool {
	v := core(version)
	return v != "" && semver.Compare(v, "v"+v1alpha1.StandbyReadsVersion) < 0
}

// StandbyReadsRefused says why spec.readReplicas.standbyReads cannot be
// true with spec.version; "" when it can. Before StandbyReadsVersion a
// standby forwards every request to the active server, so routing reads to
// the voting standbys would only add a hop. The webhook and the chart
// values hold the cluster to this one rule.
func StandbyReadsRefused(version string, standbyReads bool) string {
	if !standbyReads {
		return ""
	}
	v := core(version)
	if v != "" && semver.Compare(v, "v"+v1alpha1.StandbyReadsVersion) >= 0 {
		return ""
	}
	return fmt.Sprintf("spec.readReplicas.standbyReads needs OpenBao %s or later, whose standbys serve reads; "+
		"spec.version %s forwards every read to the active server. Unset it, or upgrade first",
		v1alpha1.StandbyReadsVersion, version)
}
