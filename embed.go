// Package operator holds the files at the repository root that the operator
// binary embeds.
package operator

import _ "embed"

// DefaultWatches is watches.yaml as shipped; --watches-file replaces it.
//
//go:embed watches.yaml
var DefaultWatches []byte
