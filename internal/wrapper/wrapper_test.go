package wrapper

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the wrapper under test and as its child, so
// the tests need no other program and run the real signal paths in
// separate processes.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "wrapper":
			os.Exit(Main(os.Args[2:], os.Stderr))
		case "child":
			os.Exit(child(os.Args[2:]))
		}
	}
	os.Exit(m.Run())
}

// child behaves as the mode in args[0] says.
func child(args []string) int {
	switch args[0] {
	case "exit":
		code, _ := strconv.Atoi(args[1])
		return code
	case "sleep":
		time.Sleep(30 * time.Second)
		return 0
	case "trap":
		return trap(args[1])
	case "orphan":
		// The middle process starts a grandchild and exits at once, so the
		// grandchild is re-parented to the wrapper and must be reaped there.
		if err := exec.Command(self(), "child", "middle", args[1]+".pid").Run(); err != nil {
			return 10
		}
		return trap(args[1])
	case "middle":
		gc := exec.Command(self(), "child", "exit-later")
		if err := gc.Start(); err != nil {
			return 11
		}
		_ = os.WriteFile(args[1], []byte(strconv.Itoa(gc.Process.Pid)), 0o600)
		return 0
	case "exit-later":
		time.Sleep(300 * time.Millisecond)
		return 0
	}
	return 99
}

// trap records every forwarded signal as a line in file and exits 0 on
// SIGTERM; its first line is "ready".
func trap(file string) int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, Forwarded...)
	appendLine(file, "ready")
	for sig := range sigs {
		appendLine(file, sig.(syscall.Signal).String())
		if sig == syscall.SIGTERM {
			return 0
		}
	}
	return 0
}

func appendLine(file, line string) {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}

func self() string {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return exe
}

// wrapperProc is a running wrapper started by a test.
type wrapperProc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan int
}

func startWrapper(t *testing.T, flags []string, childArgs ...string) *wrapperProc {
	t.Helper()
	args := append([]string{"wrapper"}, flags...)
	args = append(append(args, "--", self(), "child"), childArgs...)
	w := &wrapperProc{cmd: exec.Command(self(), args...), stderr: &syncBuffer{}, done: make(chan int, 1)}
	w.cmd.Stderr = w.stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := w.cmd.Wait()
		var exitErr *exec.ExitError
		switch {
		case errors.As(err, &exitErr):
			w.done <- exitErr.ExitCode()
		case err != nil: // not an exit status: never a success
			fmt.Fprintf(w.stderr, "test: wait for the wrapper: %v\n", err)
			w.done <- -2
		default:
			w.done <- 0
		}
	}()
	t.Cleanup(func() {
		_ = w.cmd.Process.Kill()
	})
	return w
}

func (w *wrapperProc) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-w.done:
		return code
	case <-time.After(20 * time.Second):
		t.Fatalf("wrapper did not exit; stderr:\n%s", w.stderr.String())
		return -1
	}
}

func (w *wrapperProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := w.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// waitForLine polls file until it holds want as a line.
func waitForLine(t *testing.T, file, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		data, _ := os.ReadFile(file)
		for _, line := range strings.Split(string(data), "\n") {
			if line == want {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	data, _ := os.ReadFile(file)
	t.Fatalf("%s never got line %q; has:\n%s", file, want, data)
}

func countLines(file, want string) int {
	data, _ := os.ReadFile(file)
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if line == want {
			n++
		}
	}
	return n
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestExitCodeIsTheChilds(t *testing.T) {
	for _, code := range []int{0, 3, 42} {
		w := startWrapper(t, nil, "exit", strconv.Itoa(code))
		if got := w.wait(t); got != code {
			t.Errorf("child exited %d, wrapper %d", code, got)
		}
	}
}

func TestChildKilledBySignalGives128PlusSignal(t *testing.T) {
	w := startWrapper(t, nil, "sleep")
	time.Sleep(200 * time.Millisecond) // let the child start; the signal is forwarded either way
	w.signal(t, syscall.SIGTERM)
	if got := w.wait(t); got != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit code %d, want %d", got, 128+int(syscall.SIGTERM))
	}
}

func TestCommandThatCannotStartExits127(t *testing.T) {
	cfg := Config{Command: []string{filepath.Join(t.TempDir(), "missing")}, Log: &bytes.Buffer{}}
	if code, err := Run(cfg); code != 127 || err == nil {
		t.Fatalf("code %d, err %v", code, err)
	}
}

func TestEverySignalIsForwardedToTheChild(t *testing.T) {
	file := filepath.Join(t.TempDir(), "signals")
	w := startWrapper(t, nil, "trap", file)
	waitForLine(t, file, "ready")
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2} {
		w.signal(t, sig)
		waitForLine(t, file, sig.String())
	}
	w.signal(t, syscall.SIGTERM)
	if got := w.wait(t); got != 0 {
		t.Fatalf("exit code %d after a clean SIGTERM; stderr:\n%s", got, w.stderr.String())
	}
	waitForLine(t, file, syscall.SIGTERM.String())
}

func TestOrphansAreReaped(t *testing.T) {
	file := filepath.Join(t.TempDir(), "signals")
	w := startWrapper(t, nil, "orphan", file)
	waitForLine(t, file, "ready")
	data, err := os.ReadFile(file + ".pid")
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(data))
	deadline := time.Now().Add(10 * time.Second)
	for {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			break // gone: reaped
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan %d not reaped: %s", pid, stat)
		}
		time.Sleep(50 * time.Millisecond)
	}
	w.signal(t, syscall.SIGTERM)
	if got := w.wait(t); got != 0 {
		t.Fatalf("exit code %d", got)
	}
}

func TestInstallCopiesTheBinary(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "bao-wrapper")
	if err := Install(dest); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(dest)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(self())
	got, _ := os.ReadFile(dest)
	if info.Mode().Perm() != 0o755 || !bytes.Equal(got, want) {
		t.Fatalf("installed mode %v, %d bytes (want %d)", info.Mode(), len(got), len(want))
	}
	if entries, _ := os.ReadDir(filepath.Dir(dest)); len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
}

func TestCommandLineErrors(t *testing.T) {
	for name, args := range map[string][]string{
		"no command after the flags":    {"-watch", "/x"},
		"an unknown flag":               {"-nope", "--", "true"},
		"install without a destination": {"install"},
		"install with two destinations": {"install", "a", "b"},
	} {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := Main(args, &stderr); code != 2 || !strings.Contains(stderr.String(), "usage") {
				t.Fatalf("exit %d, stderr %q", code, stderr.String())
			}
		})
	}
}

func TestWatchFlagIsSplitAndTrimmed(t *testing.T) {
	cfg, err := parseFlags([]string{"-watch", " /a/tls.crt, /a/tls.key,,", "-interval", "5s", "--", "bao", "server"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Watch, "|") != "/a/tls.crt|/a/tls.key" || cfg.Interval != 5*time.Second ||
		strings.Join(cfg.Command, " ") != "bao server" || !cfg.ReapOrphans {
		t.Fatalf("%+v", cfg)
	}
}
