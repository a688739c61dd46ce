package restore_test

import (
	"errors"
	"testing"

	"github.com/openbao/operator/internal/restore"
)

func TestTheEndOfAnUploadIsReleased(t *testing.T) {
	const a, b = "aaaa", "bbbb"
	for name, tc := range map[string]struct {
		end  restore.UploadEnd
		want bool
	}{
		"only for a checked snapshot of the expected digest": {restore.UploadEnd{Checked: true, SHA256: a, ExpectedSHA256: a}, true},
		"for a checked snapshot when no digest is named":     {restore.UploadEnd{Checked: true, SHA256: a}, true},
		"never for another digest than the one named":        {restore.UploadEnd{Checked: true, SHA256: b, ExpectedSHA256: a}, false},
		"never for a snapshot that failed its check":         {restore.UploadEnd{SHA256: a, ExpectedSHA256: a}, false},
	} {
		t.Run(name, func(t *testing.T) {
			err := restore.ReleaseEnd(tc.end)
			if (err == nil) != tc.want {
				t.Fatalf("ReleaseEnd(%+v) = %v, want release %v", tc.end, err, tc.want)
			}
			if tc.end.Checked && tc.end.ExpectedSHA256 != "" && tc.end.SHA256 != tc.end.ExpectedSHA256 && !errors.Is(err, restore.ErrDigestMismatch) {
				t.Fatalf("a digest mismatch is %v", err)
			}
		})
	}
}

// FuzzTheEndGoesOnlyToACheckedSnapshotOfTheNamedDigest: whatever the
// check said and whatever the digests, the end of the upload (the step
// that lets OpenBao install it) is released only for a snapshot that
// checked out and carries the digest named, if one is.
func FuzzTheEndGoesOnlyToACheckedSnapshotOfTheNamedDigest(f *testing.F) {
	f.Add(true, "a", "a")
	f.Add(true, "a", "b")
	f.Add(false, "a", "")
	f.Add(true, "", "a")
	f.Fuzz(func(t *testing.T, checked bool, sha, expected string) {
		e := restore.UploadEnd{Checked: checked, SHA256: sha, ExpectedSHA256: expected}
		if restore.ReleaseEnd(e) == nil && (!checked || (expected != "" && sha != expected)) {
			t.Fatalf("released the end of %+v", e)
		}
	})
}
