// Command volperms runs beside the local node and makes each directory that
// kube-controller-manager's host-path provisioner creates writable by the
// pods that mount it. The provisioner creates them 0750 root:root and
// host-path volumes ignore fsGroup, whereas the storage drivers of a real
// cluster hand a pod's fsGroup a writable volume; without this, no non-root
// pod (OpenBao runs as 100:1000) could write its data on the local node.
//
// Usage: volperms DIR. It polls DIR every 200 ms until it is stopped.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

const writable os.FileMode = 0o777

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: volperms DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		openUp(dir)
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// openUp makes every directory directly under dir writable by all.
func openUp(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // not created yet: the provisioner makes it on first use
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		info, err := os.Stat(path)
		if err != nil || info.Mode().Perm() == writable {
			continue
		}
		if err := os.Chmod(path, writable); err != nil {
			fmt.Fprintf(os.Stderr, "volperms: chmod %s: %v\n", path, err)
			continue
		}
		fmt.Printf("volperms: %s is now writable by pods\n", path)
	}
}
