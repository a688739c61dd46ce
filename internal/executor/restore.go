package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/objectstore"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/restore"
	"github.com/openbao/operator/internal/snapshot"
)

// RunRestore restores one snapshot and returns its report; it never
// returns a secret in it. It reads the object once, straight into the
// active server, through the snapshot check and a SHA-256, and keeps the
// last restore.WithheldTail bytes back until both passed: a bad object
// leaves OpenBao an upload without its end, which it does not install.
func RunRestore(ctx context.Context, cfg restore.ExecutorConfig, deps Deps) backup.Report {
	return runBounded(ctx, cfg.Timeout, deps, "restore", "snapshot restored", func(ctx context.Context, secrets *redactor) backup.Report {
		return runRestore(ctx, cfg, deps, secrets)
	})
}

// posted is what the one read found.
type posted struct {
	object objectstore.Object
	size   int64
	sha256 string
	info   snapshot.Info
}

func runRestore(ctx context.Context, cfg restore.ExecutorConfig, deps Deps, secrets *redactor) backup.Report {
	start := deps.Clock.Now()
	s, err := prepare(ctx, cfg.ExecutorConfig, deps, secrets)
	if err != nil {
		return failed(ReasonExecutorMisconfigured, err)
	}
	if cfg.SourceCluster != "" || cfg.SourceNamespace != "" {
		ns, cluster := cmp.Or(cfg.SourceNamespace, cfg.Namespace), cmp.Or(cfg.SourceCluster, cfg.Cluster)
		s.prefix = backup.ObjectPrefix(cfg.PathPrefix, ns, cluster)
		s.prover = s.prover.ForSource(ns, cluster)
	}
	for attempt := 0; ; attempt++ {
		snap, cut, err := s.restoreOnce(ctx, cfg, deps, start)
		if err == nil {
			return backup.Report{Key: snap.object.Key, Size: snap.size, SHA256: snap.sha256, RaftIndex: snap.info.Index, Unproven: s.ignored}
		}
		if !mayRetryRestore(cut, err) || attempt >= len(retryWaits) || ctx.Err() != nil {
			return failed(reasonOf(ctx, err), err)
		}
		logr.FromContextOrDiscard(ctx).Info("attempt failed; retrying", "attempt", attempt+1,
			"reason", reasonOf(ctx, err), "error", secrets.redact(err.Error()), "wait", retryWaits[attempt].String())
		deps.Sleep(ctx, retryWaits[attempt])
	}
}

// restoreOnce is one try. cut says it failed before the upload's end went
// to OpenBao (before the post, or with the end kept back), so OpenBao
// installed nothing; false once the end may have gone.
func (s *runner) restoreOnce(ctx context.Context, cfg restore.ExecutorConfig, deps Deps, start time.Time) (posted, bool, error) {
	obj, leader, err := s.prepareRestore(ctx, cfg)
	if err != nil {
		return posted{}, true, err
	}
	logr.FromContextOrDiscard(ctx).Info("posting the snapshot to the active server, checking it on the way", "key", obj.Key,
		"size", obj.Size, "withheld", restore.WithheldTail, "elapsed", deps.Clock.Since(start).Round(time.Millisecond).String())
	return s.post(ctx, leader, obj, cfg)
}

// mayRetryRestore says whether another try may succeed and cannot install
// a snapshot twice: only a try that failed before the upload's end went
// (cut), for a reason that may pass. Once the end went, whether OpenBao
// installed a snapshot it did not confirm is not known here.
func mayRetryRestore(cut bool, err error) bool {
	return cut && retryableBeforePost(err)
}

// retryableBeforePost says whether another try of the steps before the
// post may succeed: what may pass for a backup may pass here, except an
// object that is bad (a stored object cut short stays cut short) or
// missing.
func retryableBeforePost(err error) bool {
	var se *stageError
	if errors.As(err, &se) {
		switch se.reason {
		case restore.ReasonCorruptSnapshot, restore.ReasonDigestMismatch, restore.ReasonNoSnapshot, restore.ReasonObjectNotFound:
			return false
		case restore.ReasonObjectChanged:
			return true // the next try reads the object as it is now
		}
	}
	return retryable(err)
}

// prepareRestore finds the object, then logs in and finds the active
// server. Nothing of it changes OpenBao, so it may be retried.
func (s *runner) prepareRestore(ctx context.Context, cfg restore.ExecutorConfig) (objectstore.Object, openbao.Client, error) {
	obj, err := s.resolve(ctx, cfg)
	if err != nil {
		return objectstore.Object{}, nil, err
	}
	token, err := s.auth(ctx)
	if err != nil {
		return objectstore.Object{}, nil, stage(ReasonAuthFailed, err)
	}
	leader, err := s.leaderClient(ctx, token)
	return obj, leader, err
}

// resolve stats the object named, or the newest of the cluster's.
func (s *runner) resolve(ctx context.Context, cfg restore.ExecutorConfig) (objectstore.Object, error) {
	key := cfg.Key
	if cfg.Latest {
		objects, err := s.store.List(ctx, s.prefix)
		if err != nil {
			return objectstore.Object{}, stage(ReasonStoreFailed, err)
		}
		latest, ignored, err := restore.SelectLatestBefore(s.prover, objects, s.prefix, cfg.LatestBefore)
		s.ignored = ignored
		if err != nil {
			why := ""
			if !s.prover.CanSign() {
				why = "; the source's provenance key (Secret " + cfg.ProvenanceSecret() + ") is missing, so no name is proven: name the snapshot with source.key"
			}
			if msg := ignored.Message(); msg != "" {
				why += "; " + msg
			}
			return objectstore.Object{}, stage(restore.ReasonNoSnapshot, fmt.Errorf("%w (under %s)%s", err, s.prefix, why))
		}
		key = latest.Key
	}
	obj, err := s.store.Stat(ctx, key)
	if errors.Is(err, objectstore.ErrNotFound) {
		return objectstore.Object{}, stage(restore.ReasonObjectNotFound, fmt.Errorf("object %s: %w", key, err))
	}
	if err != nil {
		return objectstore.Object{}, stage(ReasonStoreFailed, err)
	}
	obj.Key = key
	return obj, nil
}

// readError names what failed a read of the object: the snapshot check
// (a corrupt or truncated object), a replaced object, or the store.
func readError(err error) error {
	var se *snapshot.Error
	switch {
	case errors.As(err, &se):
		return stage(restore.ReasonCorruptSnapshot, fmt.Errorf("the object is not a complete OpenBao snapshot (%s): %w", se.Reason, err))
	case errors.Is(err, objectstore.ErrVersionChanged):
		return stage(restore.ReasonObjectChanged, err)
	case errors.Is(err, restore.ErrDigestMismatch):
		return stage(restore.ReasonDigestMismatch, err)
	}
	return stage(ReasonStoreFailed, err)
}

// post is the one read, streamed into the active server with its end
// kept back until the object checked out. cut is true when the upload
// failed before its end went: then OpenBao installed nothing.
func (s *runner) post(ctx context.Context, leader openbao.Client, obj objectstore.Object, cfg restore.ExecutorConfig) (posted, bool, error) {
	body, err := s.store.OpenVersion(ctx, obj.Key, obj.Version)
	if err != nil {
		return posted{}, true, readError(err)
	}
	defer body.Close()
	check := snapshot.NewReader(body)
	defer check.Close()
	gate := newTailGate(check, cfg.ExpectedSHA256, restore.WithheldTail)
	err = leader.RestoreSnapshot(ctx, gate, cfg.Force)
	if gate.refusal != nil {
		return posted{}, true, fmt.Errorf("%w; the upload to OpenBao ended without the snapshot's last bytes, so it installed nothing",
			readError(gate.refusal))
	}
	if err != nil {
		return posted{}, !gate.released, postError(err, cfg.Force)
	}
	return posted{object: obj, size: check.Size(), sha256: check.SHA256(), info: check.Info()}, false, nil
}

// postError names why OpenBao refused or did not confirm the post.
func postError(err error, force bool) error {
	var status *openbao.StatusError
	switch {
	case !force && errors.As(err, &status) && status.Code == 400:
		// The archive checked out (its plain checksums, sizes and
		// structure), so what OpenBao refuses is the sealed checksums:
		// they were sealed with another cluster's keys.
		return stage(restore.ReasonSealMismatch, fmt.Errorf("%s (%w)", restore.SealMismatchMessage, err))
	case errors.As(err, &status) && errors.Is(err, openbao.ErrPermissionDenied):
		return stage(ReasonAuthFailed, fmt.Errorf("the restore identity may not post a snapshot: %w", err))
	}
	return stage(restore.ReasonRestoreFailed, err)
}
