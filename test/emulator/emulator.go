// Package emulator runs a store emulator built by `make tools` as a
// separate process on loopback, waits until it answers and stops it by the
// PID it started; gcstest and azuritetest are built on it.
package emulator

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Process is one running emulator.
type Process struct {
	Dir     string
	LogPath string
	cmd     *exec.Cmd
	exited  chan error
}

// Start runs bin with args and env in a fresh directory and calls ready
// until it returns nil, the process exits or timeout passes.
func Start(bin string, args, env []string, ready func(context.Context) error, timeout time.Duration) (*Process, error) {
	dir, err := os.MkdirTemp("", filepath.Base(bin)+"-")
	if err != nil {
		return nil, err
	}
	p := &Process{Dir: dir, LogPath: filepath.Join(dir, "emulator.log")}
	logFile, err := os.Create(p.LogPath)
	if err != nil {
		p.Stop()
		return nil, err
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), append(env, "HOME="+dir)...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		p.Stop()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p.exited = make(chan error, 1)
	go func() { p.exited <- p.cmd.Wait(); logFile.Close() }()
	if err := p.wait(ready, timeout); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

func (p *Process) wait(ready func(context.Context) error, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case exitErr := <-p.exited:
			p.exited <- exitErr
			data, _ := os.ReadFile(p.LogPath)
			return fmt.Errorf("%s exited: %v\n%s", p.cmd.Path, exitErr, data)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %s: %v", p.cmd.Path, timeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop ends the process group it started (SIGTERM, then SIGKILL after ten
// seconds: node starts children) and removes its directory.
func (p *Process) Stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		pgid := p.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.exited
		}
		p.cmd = nil
	}
	_ = os.RemoveAll(p.Dir)
}
