// Command bao-config-check loads OpenBao configuration files with OpenBao's
// own code (the v2.4.0 packages `bao server` uses) and exits non-zero with
// the reasons when OpenBao would reject them. It is stricter than the
// server: keys OpenBao would ignore with a warning are errors here.
//
// Usage: bao-config-check GROUP...
//
// A GROUP is one file, or files joined by "+" that a server loads together
// (bao server -config=a.hcl -config=b.hcl), for example
// config.hcl+selfinit.hcl. Each group is checked on its own.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/openbao/openbao/command/server"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bao-config-check FILE[+FILE...]...")
		os.Exit(2)
	}
	failed := false
	for _, group := range os.Args[1:] {
		errs := checkGroup(strings.Split(group, "+"))
		for _, err := range errs {
			fmt.Fprintf(os.Stderr, "%s: %v\n", group, err)
		}
		if len(errs) > 0 {
			failed = true
			continue
		}
		fmt.Printf("%s: ok\n", group)
	}
	if failed {
		os.Exit(1)
	}
}

// checkGroup loads and merges the files as `bao server` does
// (ServerCommand.parseConfig), then runs the checks that the server runs
// later at start, each with OpenBao's code where it is reachable offline.
func checkGroup(paths []string) []error {
	var config *server.Config
	var errs []error
	for _, path := range paths {
		current, err := server.LoadConfig(path, paths)
		if err != nil {
			return []error{fmt.Errorf("load %s: %w", path, err)}
		}
		for _, cErr := range current.Validate(path) {
			errs = append(errs, fmt.Errorf("unknown or unused key: %s", cErr.String()))
		}
		if config == nil {
			config = current
		} else {
			config = config.Merge(current)
		}
	}
	if _, err := server.CheckConfig(config, nil); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, checkLogging(config)...)
	errs = append(errs, checkListeners(config)...)
	errs = append(errs, checkStorage(config)...)
	errs = append(errs, checkSeals(config)...)
	errs = append(errs, checkServiceRegistration(config)...)
	errs = append(errs, checkSelfInit(config)...)
	return errs
}
