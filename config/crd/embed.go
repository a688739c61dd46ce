// Package crd embeds the generated CustomResourceDefinitions, so the operator
// can validate and default a resource offline exactly as the API server would.
package crd

import _ "embed"

// OpenBaoClusters is the generated CRD of OpenBaoCluster.
//
//go:embed bases/openbao.org_openbaoclusters.yaml
var OpenBaoClusters []byte
