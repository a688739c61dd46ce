package gcsstore

import (
	"context"
	"strings"
	"testing"

	"github.com/openbao/operator/internal/objectstore"
)

// TestABadKeyIsRefusedWithoutQuotingIt: the JSON parser's error may quote
// the key it was given.
func TestABadKeyIsRefusedWithoutQuotingIt(t *testing.T) {
	_, err := New(context.Background(), objectstore.Config{Provider: objectstore.ProviderGCS, Bucket: "b",
		Endpoint:    "https://storage.example.com",
		Credentials: &objectstore.Credentials{ServiceAccountJSON: objectstore.NewSecret(`{"type":"KEY-NEVER-PRINTED"}`)}})
	if err == nil || strings.Contains(err.Error(), "KEY-NEVER-PRINTED") {
		t.Fatalf("%v: want an error without the key", err)
	}
}

func TestChunksAreRoundedToGCSsUnit(t *testing.T) {
	s, err := New(context.Background(), objectstore.Config{Endpoint: "http://127.0.0.1:1", Bucket: "b", PartSize: 5<<20 + 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.(*store).chunkSize; got != 5<<20+256<<10 {
		t.Errorf("chunk %d", got)
	}
}
