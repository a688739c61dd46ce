package localnode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The helpers in this file undo what the components leave behind. Each
// compares with the facts recorded before Up and touches only what is new.

// ownedChainPrefixes are the iptables chains kubelet, kube-proxy, the CNI
// plugins and this harness create.
var ownedChainPrefixes = []string{"KUBE-", "CNI-", "LOCALNODE-"}

func ownedChain(name string) bool {
	for _, p := range ownedChainPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// iptablesCleanup returns the commands that delete every rule and chain
// added since the "before" lines: first the new rules that jump into new
// owned chains (or live in them), then flush and delete those chains.
// Each command is {binary, args...}.
func iptablesCleanup(before, now []string) [][]string {
	old := map[string]bool{}
	for _, l := range before {
		old[l] = true
	}
	var rules, flushes, deletes [][]string
	for _, line := range now {
		f := splitRule(line)
		if old[line] || len(f) < 4 {
			continue
		}
		bin, table, op, chain := f[0], f[1], f[2], f[3]
		switch {
		case op == "-N" && ownedChain(chain):
			flushes = append(flushes, []string{bin, "-w", "-t", table, "-F", chain})
			deletes = append(deletes, []string{bin, "-w", "-t", table, "-X", chain})
		case op == "-A" && !ownedChain(chain) && jumpsToOwned(f):
			rules = append(rules, append([]string{bin, "-w", "-t", table, "-D"}, f[3:]...))
		}
	}
	out := append(rules, flushes...)
	return append(out, deletes...)
}

// splitRule splits an `iptables -S` line into arguments; iptables quotes
// arguments with spaces (comments) in double quotes with \" escapes.
func splitRule(line string) []string {
	var out []string
	var cur strings.Builder
	inQuote, has := false, false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == '\\' && inQuote && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case ch == '"':
			inQuote, has = !inQuote, true
		case ch == ' ' && !inQuote:
			if has {
				out = append(out, cur.String())
				cur.Reset()
				has = false
			}
		default:
			cur.WriteByte(ch)
			has = true
		}
	}
	if has {
		out = append(out, cur.String())
	}
	return out
}

func jumpsToOwned(fields []string) bool {
	for i := 0; i+1 < len(fields); i++ {
		if (fields[i] == "-j" || fields[i] == "-g") && ownedChain(fields[i+1]) {
			return true
		}
	}
	return false
}

func runIptablesCleanup(before []string) []error {
	var errs []error
	for _, cmd := range iptablesCleanup(before, iptablesLines()) {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w: %s", strings.Join(cmd, " "), err, strings.TrimSpace(string(out))))
		}
	}
	return errs
}

// newNetns deletes the network namespaces (and with them the pods' veth
// ends) that did not exist before.
func removeNewNetns(before []string) []error {
	var errs []error
	for _, name := range newItems(before, dirNames("/run/netns")) {
		p := filepath.Join("/run/netns", name)
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount netns %s: %w", p, err))
		}
		if err := os.Remove(p); err != nil {
			errs = append(errs, fmt.Errorf("remove netns %s: %w", p, err))
		}
	}
	return errs
}

// removeNewLinks deletes the bridge and veth links that did not exist before.
func removeNewLinks(before []string, bridge string) []error {
	now, err := linkNames()
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, name := range newItems(before, now) {
		if name != bridge && !strings.HasPrefix(name, "veth") {
			continue
		}
		if out, err := exec.Command("ip", "link", "delete", name).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("delete link %s: %w: %s", name, err, strings.TrimSpace(string(out))))
		}
	}
	return errs
}

// unmountNew unmounts every mount point that did not exist before and lies
// under one of the roots, deepest first.
func unmountNew(before []string, roots []string) []error {
	now, err := mountPoints()
	if err != nil {
		return []error{err}
	}
	targets := mountsToRemove(before, now, roots)
	var errs []error
	for _, m := range targets {
		if err := syscall.Unmount(m, 0); err != nil {
			if err2 := syscall.Unmount(m, syscall.MNT_DETACH); err2 != nil && !errors.Is(err2, syscall.EINVAL) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", m, err2))
			}
		}
	}
	return errs
}

// mountsToRemove is the pure part of unmountNew.
func mountsToRemove(before, now, roots []string) []string {
	var out []string
	for _, m := range newItems(before, now) {
		for _, r := range roots {
			if m == r || strings.HasPrefix(m, r+"/") {
				out = append(out, m)
				break
			}
		}
	}
	// Deeper paths first; a mount listed twice (stacked) is unmounted twice.
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// removeNewCgroups kills what is left in the cgroups kubelet created
// (containers whose shim is gone) and removes those cgroups, deepest first.
func removeNewCgroups(before []string) []error {
	var errs []error
	for _, top := range newItems(before, topCgroups()) {
		if !strings.HasPrefix(filepath.Base(top), "kube") {
			continue
		}
		root := filepath.Join(cgroupRoot, top)
		killCgroupTree(root)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := rmdirRetry(d); err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errs
}

func killCgroupTree(root string) {
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		data, _ := os.ReadFile(p)
		for _, s := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(s); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		return nil
	})
}

func rmdirRetry(dir string) error {
	var err error
	for range 50 {
		if err = syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// restoreSysctls writes back the recorded values that changed.
func restoreSysctls(before map[string]string) []error {
	var errs []error
	for key, want := range before {
		data, err := os.ReadFile(sysctlPath(key))
		if err != nil || strings.TrimSpace(string(data)) == want {
			continue
		}
		if err := os.WriteFile(sysctlPath(key), []byte(want+"\n"), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s: %w", key, err))
		}
	}
	return errs
}

// createdPaths returns, for each global path that did not exist, its
// topmost missing ancestor: removing that removes everything Up made there.
func createdPaths(paths []string, exists func(string) bool) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		top := ""
		for q := p; q != "/" && !exists(q); q = filepath.Dir(q) {
			top = q
		}
		if top != "" && !seen[top] {
			seen[top] = true
			out = append(out, top)
		}
	}
	return out
}

func newItems(before, now []string) []string {
	old := map[string]bool{}
	for _, s := range before {
		old[s] = true
	}
	var out []string
	for _, s := range now {
		if !old[s] {
			out = append(out, s)
		}
	}
	return out
}
