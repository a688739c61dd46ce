package localnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// TearDown stops the node a test tier brought up and reports an error if
// the host is not as before it.
func TearDown(ctx context.Context, c Config, before Facts, logf Logf) error {
	start := time.Now()
	if err := Down(ctx, c, logf); err != nil {
		return fmt.Errorf("teardown failed: %w", err)
	}
	logf("teardown took %s", time.Since(start).Round(time.Millisecond))
	after, err := SnapshotFacts(c)
	if err != nil {
		return err
	}
	if diffs := DiffFacts(before, after); len(diffs) > 0 {
		logf("host facts changed by the node:")
		for _, d := range diffs {
			logf("  %s", d)
		}
		return fmt.Errorf("the node changed %d host facts", len(diffs))
	}
	logf("host facts unchanged (sysctls, mounts, links, netns, iptables, cgroups, paths, processes)")
	return nil
}

// KeepLogs copies the component logs and the logs of the pods still on
// the node (the operator's among them) out of the state directory, which
// teardown removes, so that a failed run can be diagnosed.
func KeepLogs(c Config, logf Logf) {
	dst, err := os.MkdirTemp("", "localnode-logs-")
	if err != nil {
		return
	}
	for _, dir := range []string{c.logDir(), c.path("pod-logs")} {
		if out, err := exec.Command("cp", "-r", dir, dst).CombinedOutput(); err != nil {
			logf("could not keep logs: %v %s", err, out)
			return
		}
	}
	logf("component logs kept in %s, pod logs in %s", filepath.Join(dst, "logs"), filepath.Join(dst, "pod-logs"))
}
