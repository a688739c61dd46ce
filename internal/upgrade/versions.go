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

// cloudSeals are the seals OpenBao 2.7 removed from the server binary in
// favour of external KMS plugins, which the operator does not install.
var cloudSeals = map[v1alpha1.UnsealType]bool{
	v1alpha1.UnsealAWSKMS: true, v1alpha1.UnsealGCPCKMS: true, v1alpha1.UnsealAzureKeyVault: true,
}

// Incompatible says why the operator knows the target release cannot run
// the cluster as specified; "" when it knows of no reason. The table is
// README's "OpenBao versions"; only 2.4.0 is tested here.
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
