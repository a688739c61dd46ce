package localnode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Proc is a process Up started. The start time (in clock ticks since boot)
// tells it apart from a later process that reuses the PID, so Down never
// signals a process that is not its own.
type Proc struct {
	Name      string `json:"name"`
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
}

// startProc starts a component in its own session with its output in a log
// file. It outlives the caller (`localnode up` returns while the node runs).
func startProc(name, exe string, args, env []string, logPath string) (Proc, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return Proc{}, fmt.Errorf("open log of %s: %w", name, err)
	}
	defer logFile.Close()
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return Proc{}, fmt.Errorf("start %s: %w", name, err)
	}
	// Reap the child when it exits while this process still runs.
	go func() { _ = cmd.Wait() }()
	start, err := procStartTime(cmd.Process.Pid)
	if err != nil {
		return Proc{}, fmt.Errorf("read start time of %s: %w", name, err)
	}
	return Proc{Name: name, PID: cmd.Process.Pid, StartTime: start}, nil
}

// procStat returns the state letter and start time of a process from
// /proc/PID/stat (fields 3 and 22; the command name may contain spaces).
func procStat(pid int) (state byte, start uint64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseStat(string(data))
}

func parseStat(stat string) (byte, uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0, 0, fmt.Errorf("malformed stat %q", stat)
	}
	fields := strings.Fields(stat[i+2:])
	if len(fields) < 20 {
		return 0, 0, fmt.Errorf("malformed stat %q", stat)
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("parse start time: %w", err)
	}
	return fields[0][0], start, nil
}

func procStartTime(pid int) (uint64, error) {
	_, start, err := procStat(pid)
	return start, err
}

// alive reports whether the process is still the one that was started and
// has not exited (a zombie counts as exited).
func (p Proc) alive() bool {
	state, start, err := procStat(p.PID)
	return err == nil && start == p.StartTime && state != 'Z' && state != 'X'
}

// stop sends SIGTERM, waits up to grace, then SIGKILL, and waits for exit.
func (p Proc) stop(grace time.Duration) error {
	if !p.alive() {
		return nil
	}
	if err := syscall.Kill(p.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %s (pid %d): %w", p.Name, p.PID, err)
	}
	if waitExit(p, grace) {
		return nil
	}
	if p.alive() {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
	if !waitExit(p, 10*time.Second) {
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.Name, p.PID)
	}
	return nil
}

func waitExit(p Proc, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !p.alive() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return !p.alive()
}

// RSS returns the resident memory of a running process in bytes, read
// from /proc/PID/status (VmRSS), or 0 when it is gone.
func (p Proc) RSS() uint64 {
	if !p.alive() {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}
