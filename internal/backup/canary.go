package backup

import (
	"errors"
	"fmt"
	"time"
)

// The canary is what the backup executor writes at identity.CanaryPath just
// before it takes a snapshot, so that a restored copy of that snapshot can
// be checked: it must hold exactly the value its backup recorded
// (OpenBaoBackup status.canary). It also names the object key of the
// snapshot it is taken into, so that a standby in another Kubernetes
// cluster, which cannot read the backup's status, checks what it restored
// against the name it listed and proved (CanaryOf). No field is secret.
const (
	CanaryBackupKey    = "backup"
	CanaryWrittenAtKey = "writtenAt"
	CanarySnapshotKey  = "key"
)

// CanaryValue is the canary of the backup named backupName, taken into
// the object key, written at writtenAt. The time is UTC in RFC 3339 with
// nanoseconds, so two backups never write the same value.
func CanaryValue(backupName, key string, writtenAt time.Time) (data map[string]any, stamp string) {
	stamp = writtenAt.UTC().Format(time.RFC3339Nano)
	return map[string]any{CanaryBackupKey: backupName, CanaryWrittenAtKey: stamp, CanarySnapshotKey: key}, stamp
}

// Canary is a canary as read back; a field it lacks is empty.
type Canary struct{ Backup, WrittenAt, Key string }

// CanaryOf reads the fields of a canary read back.
func CanaryOf(read map[string]any) Canary {
	str := func(k string) string { v, _ := read[k].(string); return v }
	return Canary{Backup: str(CanaryBackupKey), WrittenAt: str(CanaryWrittenAtKey), Key: str(CanarySnapshotKey)}
}

// ErrCanaryMismatch says a canary read back differs from what the backup
// recorded.
var ErrCanaryMismatch = errors.New("the canary differs from the backup's")

// CanaryMatches checks a canary read back from a restored copy against the
// backup that should have produced it: its name and the writtenAt it
// recorded (status.canary). The error, matching ErrCanaryMismatch, says
// which field differs and both values (names and times, never secrets).
func CanaryMatches(read map[string]any, backupName, writtenAt string) error {
	if writtenAt == "" {
		return fmt.Errorf("backup %s recorded no canary: %w", backupName, ErrCanaryMismatch)
	}
	for _, f := range []struct{ key, want string }{{CanaryBackupKey, backupName}, {CanaryWrittenAtKey, writtenAt}} {
		got, ok := read[f.key].(string)
		switch {
		case !ok:
			return fmt.Errorf("the canary has no %s (want %q): %w", f.key, f.want, ErrCanaryMismatch)
		case got != f.want:
			return fmt.Errorf("the canary's %s is %q, want %q: %w", f.key, got, f.want, ErrCanaryMismatch)
		}
	}
	return nil
}
