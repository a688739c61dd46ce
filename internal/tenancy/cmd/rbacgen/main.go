// Command rbacgen writes the ClusterRoles of a tenancy install into DIR
// (config/tenancy/roles), cut from the manager role that controller-gen wrote.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/openbao/operator/internal/tenancy"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: rbacgen MANAGER_ROLE DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintf(os.Stderr, "rbacgen: %v\n", err)
		os.Exit(1)
	}
}

func run(managerRole, dir string) error {
	data, err := os.ReadFile(managerRole)
	if err != nil {
		return err
	}
	files, err := tenancy.Files(data)
	if err != nil {
		return err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
