package wrapper

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

const usage = `usage:
  bao-wrapper [-watch FILE,...] [-interval 2s] -- COMMAND [ARG...]
      run COMMAND as the child of this process: forward signals, reap
      orphans, exit with its code, SIGHUP it when a watched file changes
  bao-wrapper install DEST
      copy this binary to DEST (for an init container filling an emptyDir)
  bao-wrapper ready
      exit 0 when the server at BAO_ADDR serves clients: initialized,
      unsealed, and active or a standby that knows the active server
`

// Main is the bao-wrapper command line; it returns the process exit code.
func Main(args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "ready" {
		if len(args) != 1 {
			fmt.Fprint(stderr, usage)
			return 2
		}
		if err := Ready(context.Background()); err != nil {
			fmt.Fprintf(stderr, "not ready: %v\n", err)
			return 1
		}
		return 0
	}
	if len(args) > 0 && args[0] == "install" {
		if len(args) != 2 {
			fmt.Fprint(stderr, usage)
			return 2
		}
		if err := Install(args[1]); err != nil {
			fmt.Fprintf(stderr, "bao-wrapper: %v\n", err)
			return 1
		}
		return 0
	}
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return 2
	}
	if os.Getpid() != 1 {
		// Outside a container's PID 1, become a subreaper so orphans of
		// bao are still re-parented to us and reaped.
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	}
	code, err := Run(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "bao-wrapper: %v\n", err)
	}
	return code
}

const prSetChildSubreaper = 36 // PR_SET_CHILD_SUBREAPER from linux/prctl.h

func parseFlags(args []string, stderr io.Writer) (Config, error) {
	fs := flag.NewFlagSet("bao-wrapper", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	watch := fs.String("watch", "", "comma-separated files; SIGHUP the command when their content changes consistently")
	cfg := Config{ReapOrphans: true, Log: stderr}
	fs.DurationVar(&cfg.Interval, "interval", DefaultInterval, "how often the watched files are hashed")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	cfg.Command = fs.Args()
	if len(cfg.Command) == 0 {
		fs.Usage()
		return Config{}, errors.New("no command")
	}
	for _, p := range strings.Split(*watch, ",") {
		if p = strings.TrimSpace(p); p != "" {
			cfg.Watch = append(cfg.Watch, p)
		}
	}
	return cfg, nil
}

// Install copies the running executable to dest atomically: a temporary file
// in dest's directory renamed into place, so a restarted init container never
// leaves a half-written binary for the main container to exec.
func Install(dest string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	src, err := os.Open(self)
	if err != nil {
		return fmt.Errorf("open own executable: %w", err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".bao-wrapper-*")
	if err != nil {
		return fmt.Errorf("install to %s: %w", dest, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fmt.Errorf("install to %s: %w", dest, err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return fmt.Errorf("install to %s: %w", dest, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("install to %s: %w", dest, err)
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return fmt.Errorf("install to %s: %w", dest, err)
	}
	return nil
}
