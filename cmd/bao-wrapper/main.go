// Command bao-wrapper is PID 1 of the OpenBao container: it runs bao,
// forwards signals, reaps orphans, exits with bao's exit code and sends
// SIGHUP when the mounted certificate changes. `bao-wrapper install DEST`
// copies it into a shared volume from an init container.
package main

import (
	"os"

	"github.com/openbao/operator/internal/wrapper"
)

func main() {
	os.Exit(wrapper.Main(os.Args[1:], os.Stderr))
}
