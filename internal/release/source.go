package release

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrDirtyTree is returned for a tree with uncommitted changes: a release
// names one commit, so its artifacts must be built from exactly that.
var ErrDirtyTree = fmt.Errorf("the git tree has uncommitted changes")

// inspectTree returns the commit and its time, which stands for
// SOURCE_DATE_EPOCH, and refuses a dirty tree unless allowDirty.
func inspectTree(ctx context.Context, root string, allowDirty bool) (string, time.Time, error) {
	status, err := git(ctx, root, "status", "--porcelain", "--untracked-files=normal")
	if err != nil {
		return "", time.Time{}, err
	}
	if status != "" && !allowDirty {
		return "", time.Time{}, fmt.Errorf("%w (commit or stash them):\n%s", ErrDirtyTree, status)
	}
	commit, err := git(ctx, root, "rev-parse", "HEAD")
	if err != nil {
		return "", time.Time{}, err
	}
	ct, err := git(ctx, root, "log", "-1", "--format=%ct")
	if err != nil {
		return "", time.Time{}, err
	}
	secs, err := strconv.ParseInt(ct, 10, 64)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("read the commit time %q: %w", ct, err)
	}
	return commit, time.Unix(secs, 0).UTC(), nil
}

// sourceCommit is the last commit that changed a package of this module
// that pkg links (pkg included), and its time.
func sourceCommit(ctx context.Context, root, pkg string) (string, time.Time, error) {
	out, err := run(ctx, root, []string{"GOFLAGS=-mod=readonly"}, "go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", pkg)
	if err != nil {
		return "", time.Time{}, err
	}
	args := []string{"log", "-1", "--format=%H %ct", "--"}
	for _, dir := range strings.Fields(out) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return "", time.Time{}, fmt.Errorf("package directory %s: %w", dir, err)
		}
		args = append(args, rel)
	}
	line, err := git(ctx, root, args...)
	if err != nil {
		return "", time.Time{}, err
	}
	commit, ct, _ := strings.Cut(line, " ")
	secs, err := strconv.ParseInt(ct, 10, 64)
	if err != nil || commit == "" {
		return "", time.Time{}, fmt.Errorf("no commit changed %s's sources (%q)", pkg, line)
	}
	return commit, time.Unix(secs, 0).UTC(), nil
}

func git(ctx context.Context, root string, args ...string) (string, error) {
	out, err := run(ctx, root, nil, "git", args...)
	return strings.TrimSpace(out), err
}

// run runs a command in dir with extra environment variables and returns
// its standard output; a failure carries its standard error.
func run(ctx context.Context, dir string, env []string, cmdName string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, cmdName, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", cmdName, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// tools builds (or finds cached) the pinned tools the release runs: the SBOM
// generator, and opm and grpc_health_probe for the catalog image.
func (r *release) tools(ctx context.Context) error {
	_, err := run(ctx, r.o.RepoRoot, nil, "bash", "test/tools/build.sh", "cyclonedx-gomod", "opm", "grpc_health_probe")
	return err
}

func (r *release) tool(name string) string { return filepath.Join(r.o.RepoRoot, "bin", name) }

// goBuild cross-compiles pkg for goos/goarch into the work directory, with
// the release stamped, and returns the binary's path. -trimpath and
// -buildvcs=false leave no path or VCS state of this machine in the binary;
// -buildid= leaves no build ID, so the bytes depend on the sources alone.
func (r *release) goBuild(ctx context.Context, pkg, goos, goarch string) (string, error) {
	base := filepath.Base(pkg)
	if goos == "windows" {
		base += ".exe"
	}
	out := filepath.Join(r.work, goos+"_"+goarch, base)
	ldflags := "-s -w -buildid= -X main.version=" + r.o.Version
	env := []string{"CGO_ENABLED=0", "GOOS=" + goos, "GOARCH=" + goarch, "GOTOOLCHAIN=local", "GOFLAGS=-mod=readonly"}
	start := time.Now()
	if _, err := run(ctx, r.o.RepoRoot, env, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, pkg); err != nil {
		return "", err
	}
	r.o.Logf("built %s for %s/%s in %s", pkg, goos, goarch, time.Since(start).Round(time.Millisecond))
	return out, nil
}

// splitPlatform parses os/arch.
func splitPlatform(p string) (string, string, error) {
	goos, goarch, ok := strings.Cut(p, "/")
	if !ok || goos == "" || goarch == "" || strings.Contains(goarch, "/") {
		return "", "", fmt.Errorf("platform %q is not os/arch (for example linux/arm64)", p)
	}
	return goos, goarch, nil
}
