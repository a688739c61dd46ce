package executor

import (
	"errors"
	"fmt"
	"testing"

	"github.com/openbao/operator/internal/objectstore"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/restore"
	"github.com/openbao/operator/internal/snapshot"
)

// FuzzNothingAfterTheUploadIsRetried: whatever failed after the snapshot
// was stored, however it is wrapped or joined with retryable failures, the
// attempt is not retried, so one backup never stores two snapshots.
func FuzzNothingAfterTheUploadIsRetried(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3})
	f.Add([]byte{4, 5, 6})
	f.Fuzz(func(t *testing.T, shape []byte) {
		kinds := []func() error{
			func() error { return &openbao.StatusError{Op: "login", Code: 503} },
			func() error { return &openbao.TransportError{Op: "write", Err: errors.New("reset")} },
			func() error { return &objectstore.Error{Op: "put", Err: errors.New("timeout")} },
			func() error { return &snapshot.Error{Reason: snapshot.ReasonSnapshotTruncated} },
			func() error { return stage(ReasonAuthFailed, &openbao.StatusError{Code: 500}) },
			func() error { return openbao.ErrStandby },
		}
		var err error = &storedError{key: "k", err: kinds[0]()}
		for _, b := range shape {
			other := kinds[int(b)%len(kinds)]()
			switch b % 3 {
			case 0:
				err = fmt.Errorf("wrapped: %w", err)
			case 1:
				err = errors.Join(other, err)
			case 2:
				err = stage(ReasonSnapshotFailed, err)
			}
		}
		if retryable(err) {
			t.Fatalf("%v is retried after the upload", err)
		}
	})
}

// FuzzNoRestoreIsRetriedOnceItsEndWent: whatever failed, a restore whose
// upload may have reached its end is never tried again (OpenBao may have
// installed it), and one cut before it is retried only for what may pass.
func FuzzNoRestoreIsRetriedOnceItsEndWent(f *testing.F) {
	f.Add(byte(0), false)
	f.Add(byte(3), true)
	f.Fuzz(func(t *testing.T, kind byte, cut bool) {
		kinds := []error{
			&openbao.TransportError{Op: "sys/storage/raft/snapshot", Err: errors.New("reset")},
			&openbao.StatusError{Op: "sys/storage/raft/snapshot", Code: 503},
			&objectstore.Error{Op: "get", Err: errors.New("timeout")},
			stage(ReasonStoreFailed, errors.New("connection reset")),
			stage(restore.ReasonDigestMismatch, restore.ErrDigestMismatch),
			stage(restore.ReasonCorruptSnapshot, &snapshot.Error{Reason: snapshot.ReasonSnapshotTruncated}),
		}
		err := kinds[int(kind)%len(kinds)]
		if mayRetryRestore(cut, err) && (!cut || !retryableBeforePost(err)) {
			t.Fatalf("%v is retried (cut %v)", err, cut)
		}
	})
}
