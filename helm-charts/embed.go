// Package helmcharts embeds the charts the operator renders in process.
package helmcharts

import "embed"

// OpenBaoCluster is the openbao-cluster chart. The all: prefix keeps files
// whose names start with an underscore, such as templates/_helpers.tpl.
//
//go:embed all:openbao-cluster
var OpenBaoCluster embed.FS

// OpenBaoClusterDir is the chart's directory inside OpenBaoCluster.
const OpenBaoClusterDir = "openbao-cluster"
