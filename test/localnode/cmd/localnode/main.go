// Command localnode starts and stops the local single-node Kubernetes
// cluster of the end-to-end tests, and runs the demo.
//
//	localnode up | down [-owner NAME] | status | images | install-operator | demo | facts
//
// The state directory is $OPENBAO_LOCALNODE_DIR or
// $HOME/.cache/openbao-operator/localnode. SIGINT and SIGTERM during up or
// demo tear the node down again.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/openbao/operator/test/localnode"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: localnode up|down [-owner NAME]|status|images|install-operator|demo|facts")
		os.Exit(2)
	}
	// The harness's clients log nothing worth reading; without a logger
	// controller-runtime prints a warning with a stack trace.
	crlog.SetLogger(logr.Discard())
	c, err := localnode.DefaultConfig()
	if err != nil {
		fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if os.Args[1] != "status" && os.Args[1] != "facts" {
		unlock, err := localnode.Lock(c, logf)
		if err != nil {
			fatal(err)
		}
		defer unlock()
	}
	switch os.Args[1] {
	case "up":
		err = up(ctx, c, "cli")
	case "down":
		err = down(c, os.Args[2:])
	case "status":
		err = status(c)
	case "images":
		err = importAll(c)
	case "install-operator":
		_, err = localnode.InstallOperator(ctx, c, logf)
	case "demo":
		err = demo(ctx, c)
	case "facts":
		err = printFacts(c)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fatal(err)
	}
}

func logf(format string, args ...any) {
	fmt.Printf("localnode: "+format+"\n", args...)
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "localnode: %v\n", err)
	os.Exit(1)
}

// up starts the node; when that fails or is interrupted it tears down
// whatever was started.
func up(ctx context.Context, c localnode.Config, owner string) error {
	t, err := localnode.Up(ctx, c, owner, logf)
	if err != nil {
		logf("start failed; tearing down (logs: %s)", c.LogPath("<component>"))
		if derr := localnode.Down(context.WithoutCancel(ctx), c, logf); derr != nil {
			return errors.Join(err, derr)
		}
		return err
	}
	if t.Total > 0 {
		logf("up in %s (packages %s, images %s, control plane %s, node Ready %s, DNS %s)",
			r(t.Total), r(t.Packages), r(t.Images), r(t.ControlPlane), r(t.NodeReady), r(t.DNSReady))
	}
	return nil
}

func r(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }

func down(c localnode.Config, args []string) error {
	fs := flag.NewFlagSet("down", flag.ContinueOnError)
	owner := fs.String("owner", "", "tear down only a node started by this owner (e2e, demo, cli)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	s, _, err := localnode.Status(c)
	if err != nil {
		return err
	}
	if s == nil {
		logf("no node in %s", c.StateDir)
		return nil
	}
	if *owner != "" && s.Owner != *owner {
		logf("node was started by %s, not %s: leaving it", s.Owner, *owner)
		return nil
	}
	return localnode.Down(context.Background(), c, logf)
}

func status(c localnode.Config) error {
	s, up, err := localnode.Status(c)
	if err != nil {
		return err
	}
	if s == nil {
		fmt.Printf("state: %s\nnode: not started\n", c.StateDir)
		return nil
	}
	fmt.Printf("state: %s\nnode: %s (up: %v, started by %s, address %s)\nkubeconfig: %s\n",
		c.StateDir, c.NodeName, up, s.Owner, s.NodeIP, c.Kubeconfig())
	var total uint64
	for _, p := range s.Procs {
		rss := p.RSS()
		total += rss
		fmt.Printf("  %-24s pid %-7d rss %4d MiB  log %s\n", p.Name, p.PID, rss>>20, c.LogPath(p.Name))
	}
	fmt.Printf("  %-24s                 %4d MiB (resident, node components without pods)\n", "total", total>>20)
	fmt.Printf("export KUBECONFIG=%s\n", c.Kubeconfig())
	return nil
}

// printFacts prints the host facts the node touches, as JSON, to compare a
// snapshot taken before `up` with one taken after `down`.
func printFacts(c localnode.Config) error {
	f, err := localnode.SnapshotFacts(c)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(f)
}

// importAll builds every image and imports it into the running node.
func importAll(c localnode.Config) error {
	start := time.Now()
	built, err := localnode.BuildImages(c, localnode.ImageOperator, localnode.ImageWrapper, localnode.ImageOpenBao, localnode.ImagePause, localnode.ImageCoreDNS)
	if err != nil {
		return err
	}
	logf("built in %s", r(time.Since(start)))
	for role, b := range built {
		logf("%-8s %s (cached: %v)", role, b.Ref, b.Cached)
	}
	if _, up, err := localnode.Status(c); err != nil || !up {
		logf("no node up: images built, not imported")
		return err
	}
	start = time.Now()
	if err := localnode.ImportImages(c, built, logf); err != nil {
		return err
	}
	logf("imported in %s", r(time.Since(start)))
	return nil
}
