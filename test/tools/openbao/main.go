// Command bao is the OpenBao server built from the v2.4.0 tag commit, the only
// OpenBao release on the module mirror. The version is stamped at link time.
package main

import (
	"os"

	"github.com/openbao/openbao/command"
)

func main() {
	os.Exit(command.Run(os.Args[1:]))
}
