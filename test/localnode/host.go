package localnode

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Facts are the parts of the host the node touches. A snapshot before Up
// and one after Down must be equal (see DiffFacts).
type Facts struct {
	Sysctls  map[string]string `json:"sysctls"`
	Mounts   []string          `json:"mounts"`
	Links    []string          `json:"links"`
	Netns    []string          `json:"netns"`
	Iptables []string          `json:"iptables"` // "-N"/"-A" lines by family and table
	Cgroups  []string          `json:"cgroups"`  // top-level cgroups per hierarchy
	Paths    map[string]bool   `json:"paths"`    // existence of globalPaths
	Procs    []string          `json:"procs"`    // processes that belong to a node
}

// SnapshotFacts records the host facts. Processes are matched narrowly
// (command line naming the state directory, or a pod cgroup) because other
// test runs share the same binaries.
func SnapshotFacts(c Config) (Facts, error) {
	f := Facts{Sysctls: map[string]string{}, Paths: map[string]bool{}}
	for _, key := range managedSysctls {
		if data, err := os.ReadFile(sysctlPath(key)); err == nil {
			f.Sysctls[key] = strings.TrimSpace(string(data))
		}
	}
	for _, p := range globalPaths {
		_, err := os.Lstat(p)
		f.Paths[p] = err == nil
	}
	var err error
	if f.Mounts, err = mountPoints(); err != nil {
		return f, err
	}
	if f.Links, err = linkNames(); err != nil {
		return f, err
	}
	f.Netns = dirNames("/run/netns")
	f.Iptables = iptablesLines()
	f.Cgroups = topCgroups()
	f.Procs = nodeProcesses(c.StateDir)
	return f, nil
}

// DiffFacts lists every difference between two snapshots, one per line.
func DiffFacts(before, after Facts) []string {
	var diffs []string
	for _, key := range sortedKeys(before.Sysctls, after.Sysctls) {
		if before.Sysctls[key] != after.Sysctls[key] {
			diffs = append(diffs, fmt.Sprintf("sysctl %s: %q before, %q after", key, before.Sysctls[key], after.Sysctls[key]))
		}
	}
	for _, p := range globalPaths {
		if before.Paths[p] != after.Paths[p] {
			diffs = append(diffs, fmt.Sprintf("path %s: exists %v before, %v after", p, before.Paths[p], after.Paths[p]))
		}
	}
	diffs = append(diffs, setDiff("mount", before.Mounts, after.Mounts)...)
	diffs = append(diffs, setDiff("link", before.Links, after.Links)...)
	diffs = append(diffs, setDiff("netns", before.Netns, after.Netns)...)
	diffs = append(diffs, setDiff("iptables", before.Iptables, after.Iptables)...)
	diffs = append(diffs, setDiff("cgroup", before.Cgroups, after.Cgroups)...)
	diffs = append(diffs, setDiff("process", before.Procs, after.Procs)...)
	return diffs
}

func setDiff(kind string, before, after []string) []string {
	in := func(list []string) map[string]bool {
		m := map[string]bool{}
		for _, s := range list {
			m[s] = true
		}
		return m
	}
	b, a := in(before), in(after)
	var out []string
	for _, s := range before {
		if !a[s] {
			out = append(out, fmt.Sprintf("%s gone: %s", kind, s))
		}
	}
	for _, s := range after {
		if !b[s] {
			out = append(out, fmt.Sprintf("%s added: %s", kind, s))
		}
	}
	return out
}

func sortedKeys(maps ...map[string]string) []string {
	seen := map[string]bool{}
	var keys []string
	for _, m := range maps {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// mountPoints lists mount points from /proc/self/mountinfo (field 5).
func mountPoints() ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return parseMountPoints(data), nil
}

func parseMountPoints(mountinfo []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 {
			out = append(out, unescapeMount(fields[4]))
		}
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func linkNames() ([]string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	out := make([]string, 0, len(ifaces))
	for _, i := range ifaces {
		out = append(out, i.Name)
	}
	return out, nil
}

func dirNames(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

var iptablesTables = []string{"filter", "nat", "mangle"}

// iptablesLines lists chains and rules ("-N" and "-A" lines) of both
// families; policies of built-in chains are left out.
func iptablesLines() []string {
	var out []string
	for _, bin := range []string{"iptables", "ip6tables"} {
		if _, err := exec.LookPath(bin); err != nil {
			continue
		}
		for _, table := range iptablesTables {
			data, err := exec.Command(bin, "-w", "-t", table, "-S").Output()
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(data), "\n") {
				if strings.HasPrefix(line, "-N ") || strings.HasPrefix(line, "-A ") {
					out = append(out, bin+" "+table+" "+line)
				}
			}
		}
	}
	return out
}

const cgroupRoot = "/sys/fs/cgroup"

// topCgroups lists the first-level cgroups of every hierarchy (cgroup v1
// controllers and the unified v2 tree), where kubelet creates "kubepods".
func topCgroups() []string {
	var out []string
	for _, hier := range dirNames(cgroupRoot) {
		for _, e := range dirNames(filepath.Join(cgroupRoot, hier)) {
			if info, err := os.Stat(filepath.Join(cgroupRoot, hier, e)); err == nil && info.IsDir() {
				out = append(out, hier+"/"+e)
			}
		}
	}
	return out
}

// nodeProcesses lists processes that belong to a node of this state
// directory: components and containerd shims name it on their command line,
// containers live in kubelet's pod cgroups.
func nodeProcesses(stateDir string) []string {
	var out []string
	for _, name := range dirNames("/proc") {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == os.Getpid() {
			continue
		}
		// A zombie has exited; only its parent (here often PID 1, which
		// reaps late) can make it disappear.
		if state, _, err := procStat(pid); err != nil || state == 'Z' {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		cgroup, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		args := strings.ReplaceAll(string(cmdline), "\x00", " ")
		if strings.Contains(args, stateDir) || bytes.Contains(cgroup, []byte("/kubepods")) {
			out = append(out, fmt.Sprintf("%d %s", pid, args))
		}
	}
	return out
}

func sortedStrings(s []string) []string {
	sort.Strings(s)
	return s
}
