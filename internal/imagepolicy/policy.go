// Package imagepolicy holds the platform's image policy: the repositories
// from which the operator runs images a tenant names (spec.image, its
// drill copy's, spec.backup.executorImage). It is set when the operator is
// installed (--allowed-image-repositories, the chart's
// imagePolicy.allowedRepositories), so a tenant that may edit
// OpenBaoClusters cannot widen it. The webhook and the controller ask the
// same function. It is pure.
package imagepolicy

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/values"
)

// Policy is the set of allowed repositories, each a registry host or a
// repository path prefix ("registry.corp.example", "ghcr.io/openbao"),
// matched at path boundaries. An empty policy allows any image: the
// default of an install that sets none.
type Policy struct {
	allowed []string // normalized: docker.io spelled index.docker.io, no trailing slash
}

// Parse reads a comma-separated list of repository prefixes. An entry
// with a tag, a digest or a wildcard is refused: the policy names where
// images come from, not which ones.
func Parse(list string) (Policy, error) {
	var p Policy
	for _, entry := range strings.Split(list, ",") {
		entry = strings.TrimSuffix(strings.TrimSpace(entry), "/")
		if entry == "" {
			continue
		}
		if strings.ContainsAny(entry, "@*?") || strings.Contains(entry[strings.LastIndex(entry, "/")+1:], ":") && strings.Contains(entry, "/") {
			return Policy{}, fmt.Errorf("allowed image repository %q: want a registry host or a repository path, without tag, digest or wildcard", entry)
		}
		norm, err := normalize(entry)
		if err != nil {
			return Policy{}, fmt.Errorf("allowed image repository %q: %w", entry, err)
		}
		p.allowed = append(p.allowed, norm)
	}
	slices.Sort(p.allowed)
	p.allowed = slices.Compact(p.allowed)
	return p, nil
}

// normalize spells a prefix as go-containerregistry names repositories:
// the registry host as it resolves (docker.io is index.docker.io), then
// the path as written. The host comes first and is required, so that no
// entry means something else on another default registry.
func normalize(prefix string) (string, error) {
	host, path, _ := strings.Cut(prefix, "/")
	if !strings.ContainsAny(host, ".:") && host != "localhost" {
		return "", fmt.Errorf("want a registry host first (for example ghcr.io/openbao or docker.io/library)")
	}
	reg, err := name.NewRegistry(host, name.StrictValidation)
	if err != nil {
		return "", err
	}
	if path == "" {
		return reg.Name(), nil
	}
	for _, seg := range strings.Split(path, "/") {
		if !pathComponent.MatchString(seg) {
			return "", fmt.Errorf("%q is not a repository path (lowercase components separated by /)", path)
		}
	}
	return reg.Name() + "/" + path, nil
}

// pathComponent is one component of a repository path, as the OCI
// distribution specification defines it.
var pathComponent = regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*$`)

// hasDotSegment says a path has a "." or ".." segment, which no registry
// serves and which must never pass for a path under a prefix.
func hasDotSegment(path string) bool {
	for _, seg := range strings.Split(path, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// Empty says the policy allows any image.
func (p Policy) Empty() bool { return len(p.allowed) == 0 }

// String lists the allowed prefixes, for messages.
func (p Policy) String() string { return strings.Join(p.allowed, ", ") }

// Allows says whether image (a reference with tag or digest, or a bare
// repository) comes from an allowed repository.
func (p Policy) Allows(image string) bool {
	if p.Empty() {
		return true
	}
	ref, err := name.ParseReference(image)
	if err != nil || hasDotSegment(ref.Context().RepositoryStr()) {
		return false
	}
	repo := ref.Context().Name()
	for _, prefix := range p.allowed {
		if repo == prefix || strings.HasPrefix(repo, prefix+"/") {
			return true
		}
	}
	return false
}

// Check returns the error for one image field, nil when allowed.
func (p Policy) Check(path *field.Path, image string) *field.Error {
	if p.Allows(image) {
		return nil
	}
	return field.Forbidden(path, fmt.Sprintf("image %q is not from a repository the platform allows (%s); "+
		"the allowed repositories are set when the operator is installed (--allowed-image-repositories), not per cluster",
		image, p))
}

var specPath = field.NewPath("spec")

// CheckChanged is CheckCluster for admission: on an update, an image that
// did not change is not checked again, so that a cluster stored before the
// policy was tightened can still be relabelled or have its finalizer
// removed (the controller still holds it: nothing is applied for it).
func (p Policy) CheckChanged(old, c *v1alpha1.OpenBaoCluster) field.ErrorList {
	if old == nil {
		return p.CheckCluster(c)
	}
	var errs field.ErrorList
	before := p.CheckCluster(old)
	for _, err := range p.CheckCluster(c) {
		if !slices.ContainsFunc(before, func(e *field.Error) bool { return e.Field == err.Field && e.Detail == err.Detail }) {
			errs = append(errs, err)
		}
	}
	return errs
}

// CheckCluster checks every image a cluster makes the operator run: its
// servers' (spec.image at spec.version; its drill copies run the same) and
// the backup executor's when spec.backup.executorImage names one (empty
// runs the operator's own image, which the platform installed).
func (p Policy) CheckCluster(c *v1alpha1.OpenBaoCluster) field.ErrorList {
	var errs field.ErrorList
	if err := p.Check(specPath.Child("image"), values.SpecImage(c).String()); err != nil {
		errs = append(errs, err)
	}
	if b := c.Spec.Backup; b != nil && b.ExecutorImage != "" {
		if err := p.Check(specPath.Child("backup", "executorImage"), b.ExecutorImage); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
