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

// applyRetention deletes the cluster's snapshots its retention lets go,
// never keep (the one just written), and says what it did. Each deletion
// is an audit line of the operator's log. A failure does not fail the
// backup: the next successful one retries it.
func (r *OpenBaoBackupReconciler) applyRetention(ctx context.Context, b *v1alpha1.OpenBaoBackup, c *v1alpha1.OpenBaoCluster, keep string) string {
	ret := c.Spec.Backup.Retention
	if ret == nil {
		return "no retention"
	}
	policy := backup.Retention{}
	if ret.MaxCount != nil {
		policy.MaxCount = int(*ret.MaxCount)
	}
	if ret.MaxAge != nil {
		policy.MaxAge = ret.MaxAge.Duration
	}
	ctx, cancel := context.WithTimeout(ctx, retentionTimeout)
	defer cancel()
	deleted, err := r.deleteExpired(ctx, c, policy, keep)
	logger := log.FromContext(ctx)
	for _, key := range deleted {
		logger.Info("snapshot deleted by retention", "audit", true, "event_type", "backup.retention.delete",
			"namespace", c.Namespace, "cluster", c.Name, "backup", b.Name, "key", key,
			"maxCount", policy.MaxCount, "maxAge", policy.MaxAge.String())
	}
	if err != nil {
		r.Recorder.Eventf(c, b, corev1.EventTypeWarning, "RetentionFailed", "ApplyRetention",
			"retention deleted %d old snapshots, then failed: %s", len(deleted), truncate(err.Error()))
		return fmt.Sprintf("retention deleted %d old snapshots, then failed: %s", len(deleted), err.Error())
	}
	if len(deleted) > 0 {
		r.Recorder.Eventf(c, b, corev1.EventTypeNormal, "RetentionApplied", "ApplyRetention",
			"retention deleted %d old snapshots: %s", len(deleted), truncate(strings.Join(deleted, ", ")))
	}
	return fmt.Sprintf("retention deleted %d old snapshots", len(deleted))
}

func (r *OpenBaoBackupReconciler) deleteExpired(ctx context.Context, c *v1alpha1.OpenBaoCluster, policy backup.Retention, keep string) ([]string, error) {
	cfg, err := r.storeConfig(ctx, c)
	if err != nil {
		return nil, err
	}
	newStore := r.NewStore
	if newStore == nil {
		newStore = open.Store
	}
	store, err := newStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return executor.ApplyRetention(ctx, store, objectPrefix(c), policy, keep, r.Clock.Now())
}

// storeConfig reads the target's credentials and CA from their Secrets,
// exactly: they are the user's and carry no label of ours.
func (r *OpenBaoBackupReconciler) storeConfig(ctx context.Context, c *v1alpha1.OpenBaoCluster) (objectstore.Config, error) {
	t := c.Spec.Backup.Target
	cfg := objectstore.Config{Provider: t.Provider, Endpoint: t.Endpoint, Bucket: t.Bucket, Region: t.Region, PathStyle: t.UsePathStyle}
	if ref := t.CASecretRef; ref != nil {
		s, err := r.readSecret(ctx, c.Namespace, ref.Name)
		if err != nil {
			return cfg, err
		}
		cfg.CAPEM = s.Data[backup.CAKey(ref)]
	}
	if ref := t.CredentialsSecretRef; ref != nil {
		s, err := r.readSecret(ctx, c.Namespace, ref.Name)
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
	s := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		return nil, fmt.Errorf("read Secret %s: %w", name, secrets.Redact(err))
	}
	return s, nil
}

// objectPrefix is where the cluster's snapshots live.
func objectPrefix(c *v1alpha1.OpenBaoCluster) string {
	return backup.ObjectPrefix(c.Spec.Backup.Target.PathPrefix, c.Namespace, c.Name)
}
