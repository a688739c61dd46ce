package restore

// Reasons of a failed restore executor, CamelCase for the OpenBaoRestore's
// status. The executor's general ones (AuthFailed, StoreFailed,
// LeaderNotFound, TimedOut, ExecutorMisconfigured) come from the backup
// executor.
const (
	// ReasonNoSnapshot: source.latest found no snapshot of this cluster.
	ReasonNoSnapshot = "NoSnapshot"
	// ReasonObjectNotFound: source.key names no object.
	ReasonObjectNotFound = "ObjectNotFound"
	// ReasonDigestMismatch: the object's SHA-256 is not expectedSHA256, or
	// the second read gave other bytes than the first.
	ReasonDigestMismatch = "DigestMismatch"
	// ReasonCorruptSnapshot: the object is not a complete, consistent
	// OpenBao snapshot.
	ReasonCorruptSnapshot = "CorruptSnapshot"
	// ReasonObjectChanged: the object was replaced between the check and
	// the post.
	ReasonObjectChanged = "ObjectChanged"
	// ReasonSealMismatch: OpenBao refused the snapshot because it was
	// taken by a cluster with another seal.
	ReasonSealMismatch = "SealMismatch"
	// ReasonRestoreFailed: OpenBao failed or refused the restore otherwise.
	ReasonRestoreFailed = "RestoreFailed"
)

// SealMismatchMessage says what a SealMismatch means.
const SealMismatchMessage = "OpenBao refused the snapshot: it was taken by a cluster with another seal key, whose sealed " +
	"checksums this cluster cannot open. Nothing was changed. Restore a snapshot of this cluster, or, if this cluster's " +
	"seal can open the snapshot's data (the same static key or KMS key), set force: true"
