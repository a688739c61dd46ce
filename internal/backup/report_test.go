package backup_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/openbao/operator/internal/backup"
)

// TestARetentionReportFitsTheTerminationMessage: however many snapshots
// the executor's retention deleted, the report fits the kubelet's 4096
// bytes, keeps the count, and lists the oldest keys it can.
func TestARetentionReportFitsTheTerminationMessage(t *testing.T) {
	var deleted []string
	for i := range 5000 {
		deleted = append(deleted, backup.ObjectKey("prefix/ns/bao/", time.Unix(int64(i)*3600, 0), fmt.Sprintf("%08x", i)))
	}
	r := backup.Report{Key: "prefix/ns/bao/20250101T000000Z-00000000.snap", Size: 10, SHA256: strings.Repeat("ab", 32),
		Retention: &backup.RetentionReport{Deleted: deleted, DeletedCount: len(deleted), Error: strings.Repeat("e", 5000)}}
	data := r.Encode()
	if len(data) > 4096 {
		t.Fatalf("%d bytes", len(data))
	}
	got, err := backup.ParseReport(string(data))
	if err != nil {
		t.Fatal(err)
	}
	if got.Retention == nil || got.Retention.DeletedCount != 5000 || len(got.Retention.Deleted) == 0 ||
		got.Retention.Deleted[0] != deleted[0] || got.Retention.Error == "" {
		t.Errorf("retention came back as %+v", got.Retention)
	}
	if len(r.Retention.Deleted) != 5000 {
		t.Error("Encode changed the caller's report")
	}
	small := backup.Report{Key: r.Key, Size: 10, SHA256: r.SHA256, Retention: &backup.RetentionReport{Deleted: deleted[:2], DeletedCount: 2}}
	if got, err := backup.ParseReport(string(small.Encode())); err != nil || len(got.Retention.Deleted) != 2 {
		t.Errorf("a small report came back as %+v (%v)", got.Retention, err)
	}
}
