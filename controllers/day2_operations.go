package controllers

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/day2"
)

// observeOperations reads what the cache shows of the cluster's Day-2
// operations (package day2 says what counts as under way); status, when
// given, is the one a pass is building.
func observeOperations(ctx context.Context, reader client.Reader, c *v1alpha1.OpenBaoCluster,
	status *v1alpha1.OpenBaoClusterStatus) (day2.Observation, error) {
	backups, err := listClusterBackups(ctx, reader, c.Namespace, c.Name)
	if err != nil {
		return day2.Observation{}, err
	}
	restores, err := listClusterRestores(ctx, reader, c.Namespace, c.Name)
	if err != nil {
		return day2.Observation{}, err
	}
	return day2.Observe(c, status, backups, restores), nil
}
