package scale_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on Linux
// for every architecture Go supports here.
const clockTicks = 100

// cpuTimes reads the CPU seconds (user + system) each direct child of this
// process has used, by command name: envtest's etcd and kube-apiserver, the
// controller manager and the operator; this process's own (the
// convergence poller, the audit count) as "harness"; the rest of the machine as
// "others". On 2 cores, who takes the CPU tells
// whether the operator or the API server sets the pace.
func cpuTimes() map[string]float64 {
	out := map[string]float64{}
	eachChild(func(_ int, name string, cpu float64) bool { out[name] += cpu; return true })
	if data, err := os.ReadFile("/proc/self/stat"); err == nil {
		if _, _, cpu, ok := parseStat(string(data)); ok {
			out["harness"] = cpu
		}
	}
	// The machine may be shared (builds, other tests): what the rest of
	// it used says how far the figures are disturbed.
	if busy, ok := machineBusy(); ok {
		ours := 0.0
		for _, v := range out {
			ours += v
		}
		out["others"] = busy - ours
	}
	return out
}

// machineBusy reads the CPU seconds all processors spent busy since boot
// (user, nice, system, irq, softirq, steal) from /proc/stat.
func machineBusy() (float64, bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, false
	}
	busy := 0.0
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return 0, false
		}
		busy += v
	}
	return busy / clockTicks, true
}

// parseStat reads comm, ppid, utime and stime from a /proc/<pid>/stat line;
// comm is in parentheses and may hold spaces.
func parseStat(line string) (name string, ppid int, cpu float64, ok bool) {
	open, closing := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || closing < open {
		return "", 0, 0, false
	}
	fields := strings.Fields(line[closing+1:]) // fields[0] is the state, field 3 of the line
	if len(fields) < 13 {
		return "", 0, 0, false
	}
	ppid, err1 := strconv.Atoi(fields[1])
	utime, err2 := strconv.ParseFloat(fields[11], 64)
	stime, err3 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return "", 0, 0, false
	}
	return line[open+1 : closing], ppid, (utime + stime) / clockTicks, true
}

// cpuShare formats the cores each process used between two readings.
func cpuShare(before, after map[string]float64, d time.Duration) string {
	if d <= 0 {
		return "n/a"
	}
	names := make([]string, 0, len(after))
	for n := range after {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return after[names[i]]-before[names[i]] > after[names[j]]-before[names[j]] })
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.2f", n, (after[n]-before[n])/d.Seconds()))
	}
	return strings.Join(parts, ", ")
}

// childRSS is the resident set (VmRSS, bytes) of this process's direct
// child named name (as /proc/<pid>/stat names it), or 0 if there is none:
// envtest's kube-apiserver, whose share of the watches' cost is its own.
func childRSS(name string) float64 {
	var rss float64
	eachChild(func(pid int, n string, _ float64) bool {
		if n != name {
			return true
		}
		if _, r, err := procStatus(pid); err == nil {
			rss = r
			return false
		}
		return true
	})
	return rss
}

// eachChild calls f with the pid, command name and CPU seconds of each
// direct child of this process, until f returns false.
func eachChild(f func(pid int, name string, cpu float64) bool) {
	self := os.Getpid()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil {
			continue
		}
		if name, ppid, cpu, ok := parseStat(string(data)); ok && ppid == self && !f(pid, name, cpu) {
			return
		}
	}
}
