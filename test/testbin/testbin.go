// Package testbin finds the tool binaries that `make tools` links into ./bin,
// so that every test tier runs against the same pinned builds.
package testbin

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/mod/modfile"
)

// Dir returns the directory holding the tool binaries: $OPENBAO_OPERATOR_BIN
// when set, otherwise bin/ at the root of the repository.
func Dir() (string, error) {
	if dir := os.Getenv("OPENBAO_OPERATOR_BIN"); dir != "" {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

// RepoRoot walks up from the working directory to the directory holding the
// operator's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("get working directory: %w", err)
	}
	for {
		if isOperatorRoot(dir) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no repository root above the working directory")
		}
		dir = parent
	}
}

// operatorModule is the module path whose go.mod marks the repository root;
// the tool wrapper modules below test/tools have go.mod files of their own.
const operatorModule = "github.com/openbao/operator"

func isOperatorRoot(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	return err == nil && modfile.ModulePath(data) == operatorModule
}

// Path returns the path of the named tool binary, or an error that says how
// to build it when it is missing.
func Path(name string) (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("tool %s not found at %s (run `make tools`): %w", name, path, err)
	}
	if info.Mode()&0o111 == 0 {
		return "", fmt.Errorf("tool %s at %s is not executable", name, path)
	}
	return path, nil
}
