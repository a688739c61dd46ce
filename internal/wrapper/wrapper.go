// Package wrapper is the PID-1 wrapper of the OpenBao container: it starts
// bao, forwards signals to it, reaps orphaned processes, exits with bao's exit
// code, and sends bao SIGHUP when the mounted certificate changes so that bao
// reloads it without a restart and without anyone needing pods/exec.
package wrapper

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// Forwarded are the signals passed on to the child as they arrive.
var Forwarded = []os.Signal{
	syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP,
	syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
}

// DefaultInterval is how often watched files are hashed.
const DefaultInterval = 2 * time.Second

// Config is one run of the wrapper.
type Config struct {
	Command  []string      // program and arguments to run
	Watch    []string      // files whose change triggers SIGHUP
	Interval time.Duration // poll period for Watch (DefaultInterval when 0)
	// ReapOrphans waits for every child process, not only Command: needed as
	// PID 1 (or as a subreaper), where orphans are re-parented to us. It must
	// be off inside a process with other children it does not own.
	ReapOrphans bool
	Log         io.Writer // diagnostics; os.Stderr when nil
}

// Run starts the command and returns its exit code (128+signal when it was
// killed by a signal) once it has exited.
func Run(cfg Config) (int, error) {
	if len(cfg.Command) == 0 {
		return 0, errors.New("no command to run")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Log == nil {
		cfg.Log = os.Stderr
	}
	// Before the start, so neither a signal nor the child's exit is missed.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, append([]os.Signal{syscall.SIGCHLD}, Forwarded...)...)
	defer signal.Stop(sigs)
	watcher := NewWatcher(cfg.Watch)

	cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return 127, fmt.Errorf("start %s: %w", cfg.Command[0], err)
	}
	s := &supervisor{cfg: cfg, child: cmd.Process, watcher: watcher}
	return s.loop(sigs), nil
}

// supervisor owns the running child. It never calls cmd.Wait: the child's
// status is collected by the same wait4 loop that reaps orphans, otherwise
// the two would race for it.
type supervisor struct {
	cfg     Config
	child   *os.Process
	watcher *Watcher
}

// loop forwards signals, polls the watched files every interval and reaps.
// The first SIGHUP can come one interval after the start at the earliest;
// bao installs its SIGHUP handler while building its commands, well before
// that, so a reload never hits bao's default action (exit).
func (s *supervisor) loop(sigs <-chan os.Signal) int {
	tick := time.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case sig := <-sigs:
			if sig != syscall.SIGCHLD {
				s.forward(sig)
				continue
			}
		case <-tick.C:
			s.pollFiles()
		}
		// SIGCHLD is coalesced and may be lost; reap on every wake-up.
		if code, done := s.reap(); done {
			return code
		}
	}
}

func (s *supervisor) forward(sig os.Signal) {
	// The child's Process uses a pidfd, so a signal never reaches a recycled PID.
	if err := s.child.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		s.logf("forward %s to pid %d: %v", sig, s.child.Pid, err)
	}
}

func (s *supervisor) pollFiles() {
	changed, note := s.watcher.Poll()
	if note != "" {
		s.logf("%s", note)
	}
	if changed {
		s.logf("watched files changed; sending SIGHUP to pid %d", s.child.Pid)
		s.forward(syscall.SIGHUP)
	}
}

// reap collects exited children without blocking and reports the child's
// exit code once it has exited.
func (s *supervisor) reap() (code int, done bool) {
	target := s.child.Pid
	if s.cfg.ReapOrphans {
		target = -1
	}
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(target, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return 0, false
		}
		if pid == s.child.Pid {
			return exitCode(ws), true
		}
	}
}

// exitCode follows the shell's convention: 128+N for death by signal N.
func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

func (s *supervisor) logf(format string, args ...any) {
	fmt.Fprintf(s.cfg.Log, "bao-wrapper: "+format+"\n", args...)
}
