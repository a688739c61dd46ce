// Command kubectl-openbao is the kubectl plugin of the OpenBao operator
// (`kubectl openbao status|pause|resume|step-down|backup|restore|
// resume-upgrade|restart|rotate-certs|logs|bao-env|report|check|version`), built on cobra and
// cli-runtime as kubectl is. It acts with the caller's kubeconfig and
// rights and never reads the root token.
package main

import (
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/openbao/operator/internal/plugin"
)

// version is the release, stamped by the release build
// (-ldflags -X main.version=...), as the operator's is.
var version = "dev"

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	if err := plugin.NewRootCommand(streams, version).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
