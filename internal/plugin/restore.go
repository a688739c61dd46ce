package plugin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openbao/operator/api/v1alpha1"
)

// RestoreRequest is what `restore` was asked: exactly one of Latest and
// Backup (the OpenBaoBackup whose snapshot to restore).
type RestoreRequest struct {
	Latest bool
	Backup string
	// Force sets spec.force: OpenBao's seal check of the snapshot is
	// skipped. Only the --force flag sets it.
	Force bool
	// Name names the OpenBaoRestore; empty: generated from the cluster's.
	Name string
}

// RestorePlan is what `restore` creates and what it tells the user before.
type RestorePlan struct {
	Restore *v1alpha1.OpenBaoRestore
	// Confirmation names the cluster, the snapshot and what is lost.
	Confirmation string
}

// PlanRestore decides the OpenBaoRestore of cluster that req asks for.
// backup is the OpenBaoBackup named by req.Backup (nil for --latest); it
// must be a finished backup of this cluster. It reads nothing and creates
// nothing: the confirmation is printed and answered before anything is
// created.
func PlanRestore(cluster *v1alpha1.OpenBaoCluster, backup *v1alpha1.OpenBaoBackup, req RestoreRequest) (RestorePlan, error) {
	if req.Latest == (req.Backup != "") {
		return RestorePlan{}, errors.New("give exactly one of --latest and --backup BACKUP")
	}
	r := &v1alpha1.OpenBaoRestore{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: req.Name,
			Labels: map[string]string{v1alpha1.LabelCluster: cluster.Name}},
		Spec: v1alpha1.OpenBaoRestoreSpec{ClusterName: cluster.Name, Force: req.Force},
	}
	if req.Name == "" {
		r.GenerateName = cluster.Name + "-restore-"
	}
	var snapshot string
	if req.Latest {
		r.Spec.Source.Latest = true
		snapshot = latestSnapshotLine(cluster)
	} else {
		line, err := backupSnapshotLine(cluster, backup, req.Backup)
		if err != nil {
			return RestorePlan{}, err
		}
		r.Spec.Source.Key, r.Spec.ExpectedSHA256, snapshot = backup.Status.Key, backup.Status.SHA256, line
	}
	return RestorePlan{Restore: r, Confirmation: restoreConfirmation(cluster, snapshot, req.Force)}, nil
}

// backupSnapshotLine checks that backup is a succeeded backup of cluster
// and describes its snapshot from its status.
func backupSnapshotLine(cluster *v1alpha1.OpenBaoCluster, backup *v1alpha1.OpenBaoBackup, name string) (string, error) {
	switch {
	case backup == nil:
		return "", fmt.Errorf("--backup %s: no such OpenBaoBackup in namespace %s", name, cluster.Namespace)
	case backup.Spec.ClusterName != cluster.Name:
		return "", fmt.Errorf("--backup %s is a backup of cluster %s, not of %s; restoring another cluster's snapshot "+
			"takes an OpenBaoRestore written by hand (docs/operate.md, Restore)", name, backup.Spec.ClusterName, cluster.Name)
	case backup.Status.Phase != v1alpha1.BackupSucceeded || backup.Status.Key == "":
		return "", fmt.Errorf("--backup %s has not succeeded (phase %q): it stored no snapshot to restore",
			name, backup.Status.Phase)
	}
	st := backup.Status
	taken := "at an unknown time"
	if st.CompletionTime != nil {
		taken = "taken " + st.CompletionTime.UTC().Format(time.RFC3339)
	}
	size := fmt.Sprintf("%d bytes", st.Size)
	if st.SizeText != "" {
		size += " (" + st.SizeText + ")"
	}
	line := fmt.Sprintf("OpenBaoBackup %s: key %s, %s, %s", name, st.Key, taken, size)
	if st.SHA256 != "" {
		line += ", sha256 " + st.SHA256 + " (checked before anything is posted)"
	}
	return line, nil
}

// latestSnapshotLine says that the operator, not the plugin, chooses the
// snapshot, and when.
func latestSnapshotLine(cluster *v1alpha1.OpenBaoCluster) string {
	line := "the newest proven snapshot under the cluster's own prefix, chosen by the operator when the restore runs, " +
		"not now (status.key of the OpenBaoRestore names it)"
	if b := cluster.Status.Backup; b != nil && b.LastBackupTime != nil {
		line += fmt.Sprintf("; the cluster's status records its last backup as %s at %s", orNone(b.LastBackupName),
			b.LastBackupTime.UTC().Format(time.RFC3339))
	}
	return line
}

func restoreConfirmation(cluster *v1alpha1.OpenBaoCluster, snapshot string, force bool) string {
	id := cluster.Namespace + "/" + cluster.Name
	var b strings.Builder
	fmt.Fprintf(&b, "This replaces ALL data of OpenBaoCluster %s with one snapshot:\n", id)
	fmt.Fprintf(&b, "  snapshot: %s\n", snapshot)
	fmt.Fprintf(&b, "Every write to %s since that snapshot is LOST: secrets, policies, tokens, leases and auth changes made after it.\n", id)
	b.WriteString("The operator first takes a snapshot of the cluster as it is (status.preRestoreKey of the OpenBaoRestore); restoring it undoes this restore.\n")
	if force {
		b.WriteString("--force: OpenBao's check that the snapshot was taken under this cluster's seal is SKIPPED; " +
			"a snapshot this seal cannot open leaves the cluster unable to unseal.\n")
	}
	return b.String()
}

// ErrNotConfirmed: the user did not answer yes, or could not be asked.
var ErrNotConfirmed = errors.New("not confirmed")

// Confirm decides whether a destructive command goes ahead: with --yes,
// or on a terminal when the user answers y or yes. Off a terminal (a
// script, a pipe) without --yes nobody can answer, so it refuses.
func Confirm(yes, terminal bool, in io.Reader, prompt io.Writer) error {
	if yes {
		return nil
	}
	if !terminal {
		return fmt.Errorf("%w: stdin is not a terminal, so nobody can answer; give --yes to go ahead", ErrNotConfirmed)
	}
	fmt.Fprint(prompt, "Go ahead? [y/N]: ")
	answer, _ := bufio.NewReader(in).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return fmt.Errorf("%w: nothing was created", ErrNotConfirmed)
}

// isTerminal says whether in is a terminal someone can answer on.
func isTerminal(in io.Reader) bool {
	f, ok := in.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// PlanRestore reads the cluster and, for --backup, the OpenBaoBackup,
// and decides the restore (PlanRestore).
func (c *Commands) PlanRestore(ctx context.Context, name string, req RestoreRequest) (RestorePlan, error) {
	cluster, err := c.cluster(ctx, name)
	if err != nil {
		return RestorePlan{}, err
	}
	var backup *v1alpha1.OpenBaoBackup
	if req.Backup != "" {
		backup = &v1alpha1.OpenBaoBackup{}
		err := c.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: req.Backup}, backup)
		if client.IgnoreNotFound(err) != nil {
			return RestorePlan{}, fmt.Errorf("read OpenBaoBackup %s/%s: %w", c.Namespace, req.Backup, err)
		}
		if err != nil {
			backup = nil
		}
	}
	return PlanRestore(cluster, backup, req)
}

// CreateRestore creates the planned OpenBaoRestore and returns its name.
func (c *Commands) CreateRestore(ctx context.Context, plan RestorePlan) (string, error) {
	r := plan.Restore.DeepCopy()
	if err := c.Client.Create(ctx, r); err != nil {
		return "", fmt.Errorf("create an OpenBaoRestore of %s: %w", r.Spec.ClusterName, err)
	}
	return r.Name, nil
}

func (c *cli) restoreCommand() *cobra.Command {
	var req RestoreRequest
	var yes bool
	cmd := c.clusterCommand("restore", "Restore a snapshot into the cluster (an OpenBaoRestore), after saying what is lost",
		func(ctx context.Context, cmds *Commands, cluster string) error {
			plan, err := cmds.PlanRestore(ctx, cluster, req)
			if err != nil {
				return err
			}
			fmt.Fprint(c.streams.ErrOut, plan.Confirmation)
			if err := Confirm(yes, c.isTerminal(c.streams.In), c.streams.In, c.streams.ErrOut); err != nil {
				return err
			}
			name, err := cmds.CreateRestore(ctx, plan)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.streams.Out, "openbaorestore %s/%s created; follow it with: kubectl get openbaorestore -n %s %s -w\n",
				cmds.Namespace, name, cmds.Namespace, name)
			return nil
		})
	cmd.Use = "restore CLUSTER (--latest | --backup BACKUP)"
	cmd.Long = "restore creates an OpenBaoRestore, which replaces all data of the cluster with one snapshot: --latest, the " +
		"newest proven snapshot, which the operator chooses when it runs; --backup, the snapshot an OpenBaoBackup of the " +
		"cluster stored (its key, and its digest, which is checked). It first says what will be lost and asks y/N; off a " +
		"terminal it needs --yes."
	f := cmd.Flags()
	f.BoolVar(&req.Latest, "latest", false, "restore the newest proven snapshot of the cluster (chosen by the operator at run time)")
	f.StringVar(&req.Backup, "backup", "", "restore the snapshot of this OpenBaoBackup of the cluster")
	f.BoolVar(&req.Force, "force", false, "set spec.force: skip OpenBao's check that the snapshot was taken under this cluster's seal "+
		"(only for a snapshot this seal can open; see docs/operate.md, Restore)")
	f.StringVar(&req.Name, "name", "", "name of the OpenBaoRestore (default: generated, <cluster>-restore-xxxxx)")
	f.BoolVar(&yes, "yes", false, "do not ask; needed when stdin is not a terminal")
	cmd.MarkFlagsMutuallyExclusive("latest", "backup")
	cmd.MarkFlagsOneRequired("latest", "backup")
	_ = cmd.RegisterFlagCompletionFunc("backup", c.completeBackup)
	return cmd
}

// completeBackup completes --backup with the succeeded backups of the
// cluster named by the first argument.
func (c *cli) completeBackup(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) != 1 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cmds, err := c.connect()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	list := &v1alpha1.OpenBaoBackupList{}
	if err := cmds.Client.List(cmd.Context(), list, client.InNamespace(cmds.Namespace)); err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var names []cobra.Completion
	for _, b := range list.Items {
		if b.Spec.ClusterName == args[0] && b.Status.Phase == v1alpha1.BackupSucceeded {
			names = append(names, b.Name)
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
