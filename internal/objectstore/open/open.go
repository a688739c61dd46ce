// Package open opens the objectstore.Store of a configuration's provider,
// so that callers name a provider, not a store package.
package open

import (
	"context"
	"fmt"

	"github.com/openbao/operator/internal/objectstore"
	"github.com/openbao/operator/internal/objectstore/azurestore"
	"github.com/openbao/operator/internal/objectstore/gcsstore"
	"github.com/openbao/operator/internal/objectstore/s3store"
)

// Store returns the store of cfg.Provider (S3 when empty). It makes no
// request to the store; ctx bounds the lookup of GCS's default
// credentials only. It is the executor's; the operator opens stores with
// OperatorStore.
func Store(ctx context.Context, cfg objectstore.Config) (objectstore.Store, error) {
	switch cfg.Provider {
	case objectstore.ProviderS3, "":
		return s3store.FromConfig(cfg)
	case objectstore.ProviderGCS:
		return gcsstore.New(ctx, cfg)
	case objectstore.ProviderAzure:
		return azurestore.New(cfg)
	default:
		return nil, fmt.Errorf("object store provider %q: want S3, GCS or Azure", cfg.Provider)
	}
}

// OperatorStore is Store for the operator's own process: it never lets
// the store use the operator's cloud identity (cfg.AmbientIdentity is
// cleared), so a store named in a tenant's spec is reached with the
// credentials that spec names, or not at all.
func OperatorStore(ctx context.Context, cfg objectstore.Config) (objectstore.Store, error) {
	return Store(ctx, cfg.WithoutAmbientIdentity())
}
