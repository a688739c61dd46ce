package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/go-logr/logr"

	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/objectstore"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/restore"
	"github.com/openbao/operator/internal/snapshot"
)

// RunRestore restores one snapshot and returns its report; it never
// returns a secret in it. It reads the object twice and holds neither
// read: the first streams it through the snapshot check and a SHA-256
// (and compares expectedSHA256), so a bad object is refused before
// anything reaches OpenBao; the second, pinned to the version checked,
// streams into the active server, and ends the upload without its final
// chunk unless the bytes are the same again.
func RunRestore(ctx context.Context, cfg restore.ExecutorConfig, deps Deps) backup.Report {
	return runBounded(ctx, cfg.Timeout, deps, "restore", "snapshot restored", func(ctx context.Context, secrets *redactor) backup.Report {
		return runRestore(ctx, cfg, deps, secrets)
	})
}

// checked is what the first read found.
type checked struct {
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
	var (
		snap   checked
		leader openbao.Client
	)
	for attempt := 0; ; attempt++ {
		snap, leader, err = s.prepareRestore(ctx, cfg)
		if err == nil {
			break
		}
		if !retryableBeforePost(err) || attempt >= len(retryWaits) || ctx.Err() != nil {
			return failed(reasonOf(ctx, err), err)
		}
		logr.FromContextOrDiscard(ctx).Info("attempt failed; retrying", "attempt", attempt+1,
			"reason", reasonOf(ctx, err), "error", secrets.redact(err.Error()), "wait", retryWaits[attempt].String())
		deps.Sleep(ctx, retryWaits[attempt])
	}
	// Checking reads the whole object once more than posting does: its
	// share of a long restore shows here while the post runs.
	logr.FromContextOrDiscard(ctx).Info("snapshot checked; posting it to the active server", "key", snap.object.Key,
		"size", snap.size, "elapsed", deps.Clock.Since(start).Round(time.Millisecond).String())
	// The post is never retried: whether OpenBao installed a snapshot it
	// did not confirm is not known here.
	if err := s.post(ctx, leader, snap, cfg.Force); err != nil {
		return failed(reasonOf(ctx, err), err)
	}
	return backup.Report{Key: snap.object.Key, Size: snap.size, SHA256: snap.sha256, RaftIndex: snap.info.Index, Unproven: s.ignored}
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

// prepareRestore finds and checks the object, then logs in and finds the
// active server. Nothing of it changes OpenBao, so it may be retried.
func (s *runner) prepareRestore(ctx context.Context, cfg restore.ExecutorConfig) (checked, openbao.Client, error) {
	obj, err := s.resolve(ctx, cfg)
	if err != nil {
		return checked{}, nil, err
	}
	snap, err := s.check(ctx, obj, cfg.ExpectedSHA256)
	if err != nil {
		return checked{}, nil, err
	}
	token, err := s.auth(ctx)
	if err != nil {
		return checked{}, nil, stage(ReasonAuthFailed, err)
	}
	leader, err := s.leaderClient(ctx, token)
	return snap, leader, err
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

// check is the first read: the whole object through the snapshot check
// and the digest, into nothing.
func (s *runner) check(ctx context.Context, obj objectstore.Object, expected string) (checked, error) {
	body, err := s.store.OpenVersion(ctx, obj.Key, obj.Version)
	if err != nil {
		return checked{}, readError(err)
	}
	defer body.Close()
	r := snapshot.NewReader(body)
	defer r.Close()
	if _, err := io.Copy(io.Discard, r); err != nil {
		return checked{}, readError(err)
	}
	snap := checked{object: obj, size: r.Size(), sha256: r.SHA256(), info: r.Info()}
	if expected != "" && snap.sha256 != expected {
		return checked{}, stage(restore.ReasonDigestMismatch, fmt.Errorf(
			"object %s has SHA-256 %s, not the expected %s", obj.Key, snap.sha256, expected))
	}
	return snap, nil
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
	case errors.Is(err, errReadChanged):
		return stage(restore.ReasonDigestMismatch, err)
	}
	return stage(ReasonStoreFailed, err)
}

// post is the second read, streamed into the active server.
func (s *runner) post(ctx context.Context, leader openbao.Client, snap checked, force bool) error {
	body, err := s.store.OpenVersion(ctx, snap.object.Key, snap.object.Version)
	if err != nil {
		return readError(err)
	}
	defer body.Close()
	gate := &sameBytes{r: snapshot.NewReader(body), size: snap.size, sha256: snap.sha256}
	defer gate.r.Close()
	err = leader.RestoreSnapshot(ctx, gate, force)
	if gate.err != nil {
		return fmt.Errorf("%w; OpenBao received an incomplete upload and installed nothing", readError(gate.err))
	}
	var status *openbao.StatusError
	switch {
	case err == nil:
		return nil
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

// errReadChanged says the second read gave other bytes than the first.
var errReadChanged = errors.New("the object read for the post differs from the one checked")

// sameBytes passes the second read through the snapshot check and ends it
// with io.EOF only if it is the size and digest of the first; anything
// else fails the read, so the upload never completes.
type sameBytes struct {
	r      *snapshot.Reader
	size   int64
	sha256 string
	err    error
}

func (g *sameBytes) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.r.Read(p)
	switch {
	case err == nil && g.r.Size() > g.size:
		g.err = errReadChanged
	case errors.Is(err, io.EOF) && (g.r.Size() != g.size || g.r.SHA256() != g.sha256):
		g.err = errReadChanged
	case err != nil && !errors.Is(err, io.EOF):
		g.err = err
	}
	if g.err != nil {
		return 0, g.err
	}
	return n, err
}
