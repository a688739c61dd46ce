package openbao_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/openbao/operator/internal/backup"
)

// testProvenanceKey is the provenance key of the clusters of these tests,
// mounted into the executor as a Job mounts <cluster>-backup-provenance.
const testProvenanceKey = "0123456789abcdef0123456789abcdef"

// testProver signs and proves the snapshot names of cluster team-a/<cluster>.
func testProver(namespace, cluster string) backup.Prover {
	return backup.NewProver([]byte(testProvenanceKey), namespace, cluster)
}

// provenanceKeyFile writes the key as the Job's mounted Secret holds it.
func provenanceKeyFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), backup.ProvenanceDataKey)
	if err := os.WriteFile(path, []byte(testProvenanceKey), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// plantedKey is the attack: a far-future name in the executor's
// form under the cluster's prefix, which anyone who may write there can
// choose.
func plantedKey(prefix string) string { return prefix + "99991231T000000Z-xxxxxxxx.snap" }

// forgedKey is a far-future name carrying the tag of the real name real.
func forgedKey(prefix, real string) string {
	return prefix + "99991231T000000Z" + real[len(prefix)+len("20250101T000000Z"):]
}
