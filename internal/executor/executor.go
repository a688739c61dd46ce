// Package executor is the backup executor a backup Job runs
// (`openbao-operator backup ...`): it authenticates to OpenBao, finds the
// active server, streams its Raft snapshot through the in-stream check
// straight into a multipart upload (no file, memory bounded by the parts),
// verifies the stored object and reports through the Job's termination
// message. Retries of what may pass happen here, in process; the Job only
// retries a pod that was disrupted.
package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/identity"
	"github.com/openbao/operator/internal/objectstore"
	"github.com/openbao/operator/internal/openbao"
	"github.com/openbao/operator/internal/snapshot"
)

// Deps are the executor's seams: how it reaches OpenBao and the store,
// reads its mounted files, tells time and draws randomness.
type Deps struct {
	OpenBao openbao.Factory
	// NewStore opens the target; open.Store in production.
	NewStore func(context.Context, objectstore.Config) (objectstore.Store, error)
	ReadFile func(path string) ([]byte, error)
	Clock    clock.PassiveClock
	Random   io.Reader
	// Sleep waits between attempts; it returns early when ctx ends.
	Sleep func(ctx context.Context, d time.Duration)
	// PeakRSS reads the process's peak resident memory; nil reports none.
	PeakRSS func() int64
}

// Reasons of a failed run, CamelCase for the OpenBaoBackup's status.
const (
	ReasonExecutorMisconfigured = "ExecutorMisconfigured"
	ReasonAuthFailed            = "AuthFailed"
	ReasonLeaderNotFound        = "LeaderNotFound"
	ReasonSnapshotFailed        = "SnapshotFailed"
	ReasonCanaryFailed          = "CanaryFailed"
	ReasonStoreFailed           = "StoreFailed"
	ReasonUploadUnverified      = "UploadUnverified"
	ReasonTimedOut              = "TimedOut"
)

// attempts bounds the tries of a run that fails in a way that may pass.
var retryWaits = []time.Duration{2 * time.Second, 5 * time.Second}

// Run takes one backup and returns its report; it never returns a secret
// in it.
func Run(ctx context.Context, cfg backup.ExecutorConfig, deps Deps) backup.Report {
	return runBounded(ctx, cfg.Timeout, deps, "backup", "backup stored and verified", func(ctx context.Context, secrets *redactor) backup.Report {
		return run(ctx, cfg, deps, secrets)
	})
}

// runBounded runs one executor's work within its timeout and completes
// its report: duration, peak memory, secrets redacted; one log line says
// how it ended.
func runBounded(ctx context.Context, timeout time.Duration, deps Deps, what, done string,
	work func(context.Context, *redactor) backup.Report) backup.Report {
	start := deps.Clock.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	log := logr.FromContextOrDiscard(ctx)
	secrets := &redactor{}
	report := work(ctx, secrets)
	report.Duration = deps.Clock.Since(start).Round(time.Millisecond).String()
	if deps.PeakRSS != nil {
		report.PeakRSSBytes = deps.PeakRSS()
	}
	report.Error = secrets.redact(report.Error)
	if report.Retention != nil {
		report.Retention.Error = secrets.redact(report.Retention.Error)
	}
	if report.Failed() {
		log.Info(what+" failed", "reason", report.Reason, "error", report.Error, "duration", report.Duration)
	} else {
		log.Info(done, "key", report.Key, "size", report.Size, "sha256", report.SHA256,
			"raftIndex", report.RaftIndex, "canary", report.Canary, "canaryError", report.CanaryError, "duration", report.Duration)
	}
	return report
}

func run(ctx context.Context, cfg backup.ExecutorConfig, deps Deps, secrets *redactor) backup.Report {
	s, err := prepare(ctx, cfg, deps, secrets)
	if err != nil {
		return failed(ReasonExecutorMisconfigured, err)
	}
	if !s.prover.CanSign() {
		return failed(ReasonExecutorMisconfigured, errors.New("no provenance key (--provenance-key-file): the executor signs every "+
			"snapshot's name with it, and latest and retention ignore unsigned names"))
	}
	for attempt := 0; ; attempt++ {
		report, err := s.attempt(ctx)
		if err == nil {
			return s.retain(ctx, report, secrets)
		}
		if !retryable(err) || attempt >= len(retryWaits) || ctx.Err() != nil {
			return failed(reasonOf(ctx, err), err)
		}
		logr.FromContextOrDiscard(ctx).Info("attempt failed; retrying", "attempt", attempt+1,
			"reason", reasonOf(ctx, err), "error", secrets.redact(err.Error()), "wait", retryWaits[attempt].String())
		deps.Sleep(ctx, retryWaits[attempt])
	}
}

func failed(reason string, err error) backup.Report {
	return backup.Report{Reason: reason, Error: err.Error()}
}

// runner is one run's settings, read once.
type runner struct {
	cfg    backup.ExecutorConfig
	prover backup.Prover
	deps   Deps
	store  objectstore.Store
	auth   func(ctx context.Context) (openbao.Token, error)
	caPEM  []byte
	prefix string
	// ignored is what a restore's latest left out as unproven.
	ignored *backup.Ignored
}

// stageError says which stage failed, for the reason.
type stageError struct {
	reason string
	err    error
}

func (e *stageError) Error() string { return e.err.Error() }
func (e *stageError) Unwrap() error { return e.err }

func stage(reason string, err error) error {
	if err == nil {
		return nil
	}
	return &stageError{reason: reason, err: err}
}

// attempt is one try: check the store, log in, find the leader, write the
// canary, stream, verify.
func (s *runner) attempt(ctx context.Context) (report backup.Report, err error) {
	id, err := backup.NewObjectID(s.deps.Random)
	if err != nil {
		return backup.Report{}, err
	}
	key := s.prover.SignedObjectKey(s.prefix, s.deps.Clock.Now(), id)
	if _, err := s.store.Stat(ctx, key); !errors.Is(err, objectstore.ErrNotFound) {
		if err == nil {
			err = fmt.Errorf("object %s exists already", key)
		}
		return backup.Report{}, stage(ReasonStoreFailed, err)
	}
	token, err := s.auth(ctx)
	if err != nil {
		return backup.Report{}, stage(ReasonAuthFailed, err)
	}
	leader, err := s.leaderClient(ctx, token)
	if err != nil {
		return backup.Report{}, err
	}
	armed, err := s.armDrill(ctx, leader, key)
	if err != nil {
		return backup.Report{}, err
	}
	if armed {
		defer func() {
			derr := s.disarmDrillRetrying(ctx)
			switch {
			case derr != nil && err == nil:
				err = &storedError{key: report.Key, err: derr}
			case derr != nil:
				err = errors.Join(err, derr)
			}
		}()
	}
	report, err = s.snapshotTo(ctx, leader, key)
	return report, err
}

// storedError is a failure after the snapshot was stored and verified. It
// is never retried: another attempt would store a second snapshot for
// this one backup.
type storedError struct {
	key string
	err error
}

func (e *storedError) Error() string {
	return fmt.Sprintf("the snapshot was stored as %s, then: %v", e.key, e.err)
}
func (e *storedError) Unwrap() error { return e.err }

// disarmDrillRetrying puts the idle audience back, retrying what may pass
// in place: the write is idempotent, and retrying the whole attempt
// instead would take and store another snapshot.
func (s *runner) disarmDrillRetrying(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), disarmTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		err := s.disarmDrill(ctx)
		if err == nil || !retryable(err) || attempt >= len(retryWaits) {
			return err
		}
		logr.FromContextOrDiscard(ctx).Info("putting the drill role's idle audience back failed; retrying",
			"attempt", attempt+1, "reason", reasonOf(ctx, err), "wait", retryWaits[attempt].String())
		s.deps.Sleep(ctx, retryWaits[attempt])
	}
}

// snapshotTo writes the canary, streams the snapshot into the object at
// key and verifies it.
func (s *runner) snapshotTo(ctx context.Context, leader openbao.Client, key string) (backup.Report, error) {
	canary, canaryErr, err := s.writeCanary(ctx, leader, key)
	if err != nil {
		return backup.Report{}, err
	}
	body, err := leader.Snapshot(ctx)
	if err != nil {
		return backup.Report{}, stage(ReasonSnapshotFailed, err)
	}
	defer body.Close()
	checked := snapshot.NewReader(body)
	defer checked.Close()
	put, err := s.store.Put(ctx, key, checked)
	if err != nil {
		return backup.Report{}, uploadError(err)
	}
	if err := s.verify(ctx, key, put, checked); err != nil {
		return backup.Report{}, err
	}
	return backup.Report{Key: key, Size: put.Size, SHA256: checked.SHA256(), RaftIndex: checked.Info().Index,
		Canary: canary, CanaryError: canaryErr}, nil
}

// armDrill sets the drill role's audience to this snapshot's just before
// it is taken (identity.DrillArm), so that the snapshot, and a drill's
// copy restored from it, accept the token the operator mints for that
// audience. A cluster whose identity has no drill role (an earlier
// revision, or a token of the user's that may not set it: 4xx) is backed
// up unarmed, and a drill of it cannot log in to the copy.
func (s *runner) armDrill(ctx context.Context, leader openbao.Client, key string) (bool, error) {
	arm := identity.DrillArm(s.clusterRef(), key)
	err := leader.Write(ctx, arm.Path, arm.Data)
	var status *openbao.StatusError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &status) && status.Code < 500:
		logr.FromContextOrDiscard(ctx).Info("the drill role's audience was not set: this backup's restore drill "+
			"cannot log in to its copy", "status", status.Code)
		return false, nil
	}
	return false, stage(ReasonSnapshotFailed, fmt.Errorf("set the drill role's audience: %w", err))
}

// disarmTimeout bounds putting the idle audience back, all tries
// together, which go on even when the run's own time is up.
const disarmTimeout = 30 * time.Second

// disarmDrill puts the drill role's idle audience back once the snapshot
// was taken, with a fresh login (the attempt's token may have expired
// during a long upload): from then on this cluster refuses every drill
// token. If it fails the attempt fails, so no drill ever mints a token for
// the audience this cluster still accepts.
func (s *runner) disarmDrill(ctx context.Context) error {
	token, err := s.auth(ctx)
	if err != nil {
		return stage(ReasonAuthFailed, fmt.Errorf("log in to put the drill role's idle audience back: %w", err))
	}
	leader, err := s.leaderClient(ctx, token)
	if err != nil {
		return err
	}
	disarm := identity.DrillDisarm(s.clusterRef())
	if err := leader.Write(ctx, disarm.Path, disarm.Data); err != nil {
		return stage(ReasonSnapshotFailed, fmt.Errorf("put the drill role's idle audience back: %w", err))
	}
	return nil
}

// clusterRef is the cluster being backed up, by name.
func (s *runner) clusterRef() *v1alpha1.OpenBaoCluster {
	return &v1alpha1.OpenBaoCluster{ObjectMeta: metav1.ObjectMeta{Namespace: s.cfg.Namespace, Name: s.cfg.Cluster}}
}

// writeCanary writes this backup's canary on the active server just before
// the snapshot, so the snapshot holds it. A cluster without the canary (no
// mount: 404; an identity from an earlier release or a user's token
// without the path: 403) is backed up without one, and the report says
// why; other failures are the attempt's.
func (s *runner) writeCanary(ctx context.Context, leader openbao.Client, key string) (stamp, skipped string, err error) {
	data, stamp := backup.CanaryValue(s.cfg.Backup, key, s.deps.Clock.Now())
	err = leader.Write(ctx, identity.CanaryPath, data)
	var status *openbao.StatusError
	switch {
	case err == nil:
		return stamp, "", nil
	case errors.As(err, &status) && (errors.Is(err, openbao.ErrPermissionDenied) || errors.Is(err, openbao.ErrNotFound)):
		return "", fmt.Sprintf("writing %s was refused (HTTP %d): the cluster has no canary mount or the backup's "+
			"policy may not write it", identity.CanaryPath, status.Code), nil
	}
	return "", "", stage(ReasonCanaryFailed, fmt.Errorf("write the canary: %w", err))
}

// uploadError names what failed a Put: the snapshot check (its reason),
// or the store.
func uploadError(err error) error {
	var se *snapshot.Error
	if errors.As(err, &se) {
		return stage(se.Reason, err)
	}
	var oe *openbao.TransportError
	if errors.As(err, &oe) {
		return stage(ReasonSnapshotFailed, err)
	}
	return stage(ReasonStoreFailed, err)
}

// reasonOf is the report's reason for err.
func reasonOf(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		return ReasonTimedOut
	}
	var se *stageError
	if errors.As(err, &se) {
		return se.reason
	}
	return ReasonSnapshotFailed
}

// retryable says whether another attempt may succeed: the network, a
// standby that just lost leadership, a sealed or overloaded server, a
// snapshot cut short, a store that did not answer. Not refusals: a bad
// identity, a corrupt snapshot, a store that refuses the credentials; and
// nothing after the snapshot was stored.
func retryable(err error) bool {
	var stored *storedError
	if errors.As(err, &stored) {
		return false
	}
	var snapErr *snapshot.Error
	if errors.As(err, &snapErr) {
		return snapErr.Reason == snapshot.ReasonSnapshotTruncated
	}
	var status *openbao.StatusError
	if errors.As(err, &status) {
		return status.Code >= 500 || errors.Is(err, openbao.ErrStandby)
	}
	var storeErr *objectstore.Error
	if errors.As(err, &storeErr) {
		return !storeErr.Permanent
	}
	var transport *openbao.TransportError
	return errors.As(err, &transport)
}
