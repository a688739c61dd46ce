package restore

import (
	"errors"
	"fmt"
)

// WithheldTail is how much of a snapshot's end the restore executor keeps
// back from OpenBao until the whole object has passed the snapshot check
// and its SHA-256: it streams the object once, straight into POST
// sys/storage/raft/snapshot, and only these last bytes wait.
//
// Failing the upload at its very end is not enough: OpenBao 2.4.0 installs
// a snapshot whose upload never sent its final chunk, and even one cut 9
// bytes short of its end (the gzip trailer and a byte of the last deflate
// block; "failed to close snapshot decompressor", then it installs); cut 64
// bytes short, it installs nothing (TestOpenBaoInstallsNothingFromAnUpload
// CutBeforeItsEnd, test/openbao). What it cannot do without is the end of
// the archive: SHA256SUMS and SHA256SUMS.sealed come last, a few KiB,
// and without them it has no sums to hold state.bin against. Deflate
// writes its output in order and every 2 compressed bytes carry at least
// one byte of it, so the last MiB of the object carries at least the last
// 512 KiB of the archive: the sums, with a margin of about a hundred times
// what they take. A snapshot smaller than this is held whole until checked.
const WithheldTail = 1 << 20

// UploadEnd is what the executor knows once it has read the whole object
// and holds back its last WithheldTail bytes.
type UploadEnd struct {
	// Checked says the snapshot check passed: the archive is complete,
	// its entries match their sums, the sealed sums are there.
	Checked bool
	// SHA256 is the digest of the bytes read; ExpectedSHA256 the one the
	// restore names, empty when it names none.
	SHA256, ExpectedSHA256 string
}

// ErrDigestMismatch says the object is not the snapshot the restore names.
var ErrDigestMismatch = errors.New("the snapshot's SHA-256 is not the expected one")

// errUnchecked says the end was asked for before the check passed.
var errUnchecked = errors.New("the snapshot did not pass its check")

// ReleaseEnd decides the one step that can install a snapshot: whether the
// withheld end of the upload goes to OpenBao. Nil releases it; an error
// keeps it back, and the upload fails without it, so OpenBao installs
// nothing. It releases only a snapshot that checked out and, when the
// restore names a digest, has that digest.
func ReleaseEnd(e UploadEnd) error {
	switch {
	case !e.Checked:
		return errUnchecked
	case e.ExpectedSHA256 != "" && e.SHA256 != e.ExpectedSHA256:
		return fmt.Errorf("%w: it has %s, not the expected %s", ErrDigestMismatch, e.SHA256, e.ExpectedSHA256)
	}
	return nil
}
