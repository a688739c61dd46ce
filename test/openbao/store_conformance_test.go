package openbao_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/openbao/operator/internal/objectstore"
	"github.com/openbao/operator/internal/objectstore/open"
	"github.com/openbao/operator/internal/objectstore/s3store"
	"github.com/openbao/operator/test/azuritetest"
	"github.com/openbao/operator/test/gcstest"
	"github.com/openbao/operator/test/miniotest"
	"github.com/openbao/operator/test/storetest"
)

// conformancePart is the smallest part S3 allows: the suite's streams are
// a few parts long.
const conformancePart = 5 << 20

// The conformance tests stay serial, unlike the rest of the tier: the suite
// measures Put's memory as this process's heap growth, which another test
// running beside it would inflate. Go runs every serial test before the
// first parallel one starts.

func TestStoreConformanceS3OnMinIO(t *testing.T) {
	m := miniotest.Start(t)
	storetest.Run(t, storetest.Target{
		Store:    s3Store(t, m, func(c *s3store.Config) { c.Concurrency = 2 }),
		PartSize: conformancePart, Concurrency: 2,
		Leftovers: func(t *testing.T) int { return incompleteUploads(t, m) },
	})
}

func gcsConfig(g *gcstest.Server) objectstore.Config {
	return objectstore.Config{Provider: objectstore.ProviderGCS, Endpoint: g.Endpoint, Bucket: g.Bucket, PartSize: conformancePart}
}

func TestStoreConformanceGCSOnFakeGCSServer(t *testing.T) {
	g := gcstest.Start(t)
	store, err := open.Store(context.Background(), gcsConfig(g))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, storetest.Target{Store: store, PartSize: conformancePart, Concurrency: 1})

	cfg := gcsConfig(g)
	cfg.Bucket = "missing"
	noBucket, err := open.Store(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := noBucket.Put(context.Background(), "x", bytes.NewReader([]byte("x"))); !objectstore.IsPermanent(err) {
		t.Errorf("a missing bucket: %v, want a permanent error", err)
	}
	g.Stop()
	if _, err := store.Stat(context.Background(), "x"); err == nil || objectstore.IsPermanent(err) {
		t.Errorf("a store that is down: %v, want an error that may pass", err)
	}
}

func azureConfig(a *azuritetest.Server, concurrency int) objectstore.Config {
	return objectstore.Config{
		Provider: objectstore.ProviderAzure, Endpoint: a.Endpoint, PathStyle: true, Bucket: a.Container,
		PartSize: conformancePart, Concurrency: concurrency,
		Credentials: &objectstore.Credentials{AccountName: a.AccountName, AccountKey: objectstore.NewSecret(a.AccountKey)},
	}
}

func TestStoreConformanceAzureOnAzurite(t *testing.T) {
	a := azuritetest.Start(t)
	store, err := open.Store(context.Background(), azureConfig(a, 2))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, storetest.Target{Store: store, PartSize: conformancePart, Concurrency: 2})

	cfg := azureConfig(a, 1)
	cfg.Credentials.AccountKey = objectstore.NewSecret("d3Jvbmcta2V5LXdyb25nLWtleQ==")
	wrong, err := open.Store(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = wrong.Put(context.Background(), "x", bytes.NewReader([]byte("x")))
	if !objectstore.IsPermanent(err) || strings.Contains(err.Error(), a.AccountKey) {
		t.Errorf("a wrong account key: %v, want a permanent error without the key", err)
	}
	a.Stop()
	if _, err := store.Stat(context.Background(), "x"); err == nil || objectstore.IsPermanent(err) {
		t.Errorf("a store that is down: %v, want an error that may pass", err)
	}
}
