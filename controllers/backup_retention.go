package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/openbao/operator/api/v1alpha1"
	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/executor"
	"github.com/openbao/operator/internal/objectstore"
	"github.com/openbao/operator/internal/objectstore/open"
	"github.com/openbao/operator/internal/secrets"
)

// retentionTimeout bounds listing and deleting old snapshots.
const retentionTimeout = 2 * time.Minute

// applyRetention applies the cluster's retention after a successful
// backup, or reads what the executor's did (backup.WhoRetains decides),
// and says what was done. Each deletion is an audit line of the
// operator's log. A failure does not fail the backup: the next successful
// one retries it.
func (r *OpenBaoBackupReconciler) applyRetention(ctx context.Context, b *v1alpha1.OpenBaoBackup, c *v1alpha1.OpenBaoCluster,
	report backup.Report) string {
	who, policy := backup.WhoRetainsFor(c)
	if who == backup.RetentionByExecutor {
		return r.executorRetention(ctx, b, c, policy, report.Retention) + r.ignoredOutcome(b, c, report.Unproven)
	}
	if report.Retention != nil {
		// The spec changed while the Job ran: still audit what it deleted.
		r.auditDeleted(ctx, b, c, policy, report.Retention.Deleted, "executor")
	}
	if who == backup.RetentionNone {
		return "no retention"
	}
	ctx, cancel := context.WithTimeout(ctx, retentionTimeout)
	defer cancel()
	deleted, ignored, err := r.deleteExpired(ctx, c, policy, report.Key)
	r.auditDeleted(ctx, b, c, policy, deleted, "operator")
	errText := ""
	if err != nil {
		errText = err.Error()
	}
	return r.retentionOutcome(b, c, "retention", len(deleted), deleted, errText) + r.ignoredOutcome(b, c, ignored)
}

// ignoredOutcome tells, in a Warning event and the backup's message, of
// the objects retention ignored because their names are not proven to be
// this cluster's executor's: someone else wrote them under its prefix
// (or an earlier release did, before names were signed).
func (r *OpenBaoBackupReconciler) ignoredOutcome(b *v1alpha1.OpenBaoBackup, c *v1alpha1.OpenBaoCluster, ignored *backup.Ignored) string {
	msg := ignored.Message()
	if msg == "" {
		return ""
	}
	r.Recorder.Eventf(c, b, corev1.EventTypeWarning, "UnprovenSnapshotsIgnored", "ApplyRetention", "retention %s", truncate(msg))
	return "; " + msg
}

// executorRetention audits what the executor says its retention deleted:
// the target names no credentials, so the operator may not reach the
// store itself (its own cloud identity is not the tenant's) and cannot
// check the executor's word, which the lines say.
func (r *OpenBaoBackupReconciler) executorRetention(ctx context.Context, b *v1alpha1.OpenBaoBackup, c *v1alpha1.OpenBaoCluster,
	policy backup.Retention, rep *backup.RetentionReport) string {
	if rep == nil {
		msg := "the executor reported no retention (the target names no credentials, so only the backup Job may apply it; " +
			"is spec.backup.executorImage an older executor?)"
		r.Recorder.Eventf(c, b, corev1.EventTypeWarning, "RetentionNotReported", "ApplyRetention", "%s", msg)
		return msg
	}
	r.auditDeleted(ctx, b, c, policy, rep.Deleted, "executor")
	if n := rep.DeletedCount - len(rep.Deleted); n > 0 {
		log.FromContext(ctx).Info("snapshots deleted by retention, not listed in the executor's report", "audit", true,
			"event_type", "backup.retention.delete", "reportedBy", "executor", "namespace", c.Namespace, "cluster", c.Name,
			"backup", b.Name, "count", n)
	}
	return r.retentionOutcome(b, c, "retention (applied by the backup Job, as its executor reports)", rep.DeletedCount, rep.Deleted, rep.Error)
}

// auditDeleted writes one audit line per deleted key; reportedBy says
// whose word it is: the operator's own deletion, or the executor's report.
func (r *OpenBaoBackupReconciler) auditDeleted(ctx context.Context, b *v1alpha1.OpenBaoBackup, c *v1alpha1.OpenBaoCluster,
	policy backup.Retention, keys []string, reportedBy string) {
	logger := log.FromContext(ctx)
	prefix := objectPrefix(c)
	for _, key := range keys {
		_, underPrefix := backup.ParseObjectKey(prefix, key)
		logger.Info("snapshot deleted by retention", "audit", true, "event_type", "backup.retention.delete",
			"reportedBy", reportedBy, "namespace", c.Namespace, "cluster", c.Name, "backup", b.Name, "key", key,
			"underClusterPrefix", underPrefix, "maxCount", policy.MaxCount, "maxAge", policy.MaxAge.String())
	}
}

// retentionOutcome tells of a retention in an event and returns the
// backup's message.
func (r *OpenBaoBackupReconciler) retentionOutcome(b *v1alpha1.OpenBaoBackup, c *v1alpha1.OpenBaoCluster, what string,
	count int, keys []string, errText string) string {
	if errText != "" {
		r.Recorder.Eventf(c, b, corev1.EventTypeWarning, "RetentionFailed", "ApplyRetention",
			"%s deleted %d old snapshots, then failed: %s", what, count, truncate(errText))
		return fmt.Sprintf("%s deleted %d old snapshots, then failed: %s", what, count, errText)
	}
	if count > 0 {
		r.Recorder.Eventf(c, b, corev1.EventTypeNormal, "RetentionApplied", "ApplyRetention",
			"%s deleted %d old snapshots: %s", what, count, truncate(strings.Join(keys, ", ")))
	}
	return fmt.Sprintf("%s deleted %d old snapshots", what, count)
}

// deleteExpired deletes with the credentials the target names and only
// those: the store is opened without the operator's ambient identity
// whatever NewStore is.
func (r *OpenBaoBackupReconciler) deleteExpired(ctx context.Context, c *v1alpha1.OpenBaoCluster, policy backup.Retention,
	keep string) ([]string, *backup.Ignored, error) {
	prover, err := r.prover(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := r.storeConfig(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	newStore := r.NewStore
	if newStore == nil {
		newStore = open.OperatorStore
	}
	store, err := newStore(ctx, cfg.WithoutAmbientIdentity())
	if err != nil {
		return nil, nil, err
	}
	return executor.ApplyRetention(ctx, store, prover, objectPrefix(c), policy, keep, r.Clock.Now())
}

// storeConfig reads the target's credentials and CA from their Secrets,
// exactly: they are the user's and carry no label of ours.
func (r *OpenBaoBackupReconciler) storeConfig(ctx context.Context, c *v1alpha1.OpenBaoCluster) (objectstore.Config, error) {
	return storeConfigOf(ctx, r.APIReader, c.Namespace, c.Spec.Backup.Target)
}

// storeConfigOf is the store of target t in namespace, with the
// credentials and CA of the Secrets it names read through reader.
func storeConfigOf(ctx context.Context, reader client.Reader, namespace string, t v1alpha1.BackupTarget) (objectstore.Config, error) {
	cfg := objectstore.Config{Provider: t.Provider, Endpoint: t.Endpoint, Bucket: t.Bucket, Region: t.Region, PathStyle: t.UsePathStyle}
	if ref := t.CASecretRef; ref != nil {
		s, err := readUserSecret(ctx, reader, namespace, ref.Name)
		if err != nil {
			return cfg, err
		}
		cfg.CAPEM = s.Data[backup.CAKey(ref)]
	}
	if ref := t.CredentialsSecretRef; ref != nil {
		s, err := readUserSecret(ctx, reader, namespace, ref.Name)
		if err != nil {
			return cfg, err
		}
		creds, err := backup.StoreCredentials(t.Provider, func(k string) (string, error) { return string(s.Data[k]), nil })
		if err != nil {
			return cfg, fmt.Errorf("Secret %s: %w", ref.Name, err)
		}
		cfg.Credentials = creds
	}
	return cfg, nil
}

func (r *OpenBaoBackupReconciler) readSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	return readUserSecret(ctx, r.APIReader, namespace, name)
}

func readUserSecret(ctx context.Context, reader client.Reader, namespace, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		return nil, fmt.Errorf("read Secret %s: %w", name, secrets.Redact(err))
	}
	return s, nil
}

// objectPrefix is where the cluster's snapshots live.
func objectPrefix(c *v1alpha1.OpenBaoCluster) string {
	return backup.ObjectPrefix(c.Spec.Backup.Target.PathPrefix, c.Namespace, c.Name)
}
