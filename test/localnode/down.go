package localnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Down stops the node and restores the host from the state file: it ends
// by PID what Up started, unmounts, removes links, network namespaces,
// iptables chains, cgroups and the paths it created, restores the sysctls
// and finally removes the state directory. It is idempotent and keeps going
// after a failed step; every failure is in the returned error.
func Down(ctx context.Context, c Config, logf Logf) error {
	s, err := loadState(c)
	if errors.Is(err, errNoState) {
		return nil
	}
	if err != nil {
		return err
	}
	start := time.Now()
	errs := stopProcesses(ctx, c, s, logf)
	errs = append(errs, restoreHost(c, s)...)
	if len(errs) > 0 {
		return fmt.Errorf("tear down local node (state kept in %s): %w", c.StateDir, errors.Join(errs...))
	}
	logf("node down in %s", time.Since(start).Round(time.Millisecond))
	return nil
}

// stopProcesses stops kubelet first (so it recreates nothing), then every
// pod through the CRI, then the other components in reverse start order,
// then whatever of the node is left (shims, containers) by PID.
func stopProcesses(ctx context.Context, c Config, s *State, logf Logf) []error {
	var errs []error
	byName := map[string]Proc{}
	for _, p := range s.Procs {
		byName[p.Name] = p
	}
	if p, ok := byName["kubelet"]; ok {
		errs = appendErr(errs, p.stop(15*time.Second))
	}
	if p, ok := byName["containerd"]; ok && p.alive() {
		if err := stopAllSandboxes(ctx, c.containerdSock()); err != nil {
			logf("stopping pods through the CRI failed (%v); killing what is left", err)
		}
	}
	for i := len(s.Procs) - 1; i >= 0; i-- {
		errs = appendErr(errs, s.Procs[i].stop(15*time.Second))
	}
	kubepodsIsOurs := !hasCgroup(s.Before.Cgroups, "kubepods")
	leftovers := leftoverPIDs(c.containerdSock(), kubepodsIsOurs)
	for _, pid := range leftovers {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, pid := range leftovers {
		if start, err := procStartTime(pid); err == nil {
			waitExit(Proc{Name: "leftover", PID: pid, StartTime: start}, 10*time.Second)
		}
	}
	if len(leftovers) > 0 {
		logf("killed %d leftover shim and container processes", len(leftovers))
	}
	return errs
}

func hasCgroup(cgroups []string, name string) bool {
	for _, cg := range cgroups {
		if strings.HasSuffix(cg, "/"+name) {
			return true
		}
	}
	return false
}

// leftoverPIDs finds what the node started indirectly and the CRI did not
// stop: containerd shims serving this node's socket and, when kubelet
// created the kubepods cgroups, the container processes in them. Nothing
// else is touched, not even a process reading a log in the state directory.
func leftoverPIDs(containerdSock string, kubepods bool) []int {
	var pids []int
	for _, name := range dirNames("/proc") {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.Split(string(cmdline), "\x00")
		cgroup, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if isOurShim(args, containerdSock) || (kubepods && strings.Contains(string(cgroup), ":/kubepods")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// isOurShim reports whether a command line is a containerd shim started by
// the containerd listening on sock.
func isOurShim(args []string, sock string) bool {
	if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
		return false
	}
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-address" && args[i+1] == sock {
			return true
		}
	}
	return false
}

func appendErr(errs []error, err error) []error {
	if err != nil {
		return append(errs, err)
	}
	return errs
}

// restoreHost undoes the host changes, the order mattering: network
// namespaces hold veth ends, mounts must be gone before paths are removed.
func restoreHost(c Config, s *State) []error {
	var errs []error
	errs = append(errs, removeNewNetns(s.Before.Netns)...)
	roots := append([]string{c.StateDir}, globalPaths...)
	errs = append(errs, unmountNew(s.Before.Mounts, roots)...)
	errs = append(errs, removeNewLinks(s.Before.Links, c.Bridge)...)
	errs = append(errs, runIptablesCleanup(s.Before.Iptables)...)
	errs = append(errs, removeNewCgroups(s.Before.Cgroups)...)
	errs = append(errs, restoreSysctls(s.Before.Sysctls)...)
	if len(errs) > 0 {
		return errs
	}
	// Nothing may be mounted below a path before it is removed: a leftover
	// bind mount would let RemoveAll delete host files through it.
	for _, p := range append(s.Created, c.StateDir) {
		if err := removeUnmounted(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func removeUnmounted(path string) error {
	mounts, err := mountPoints()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if m == path || strings.HasPrefix(m, path+"/") {
			return fmt.Errorf("not removing %s: %s is still mounted", path, m)
		}
	}
	if err := os.RemoveAll(filepath.Clean(path)); err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}
