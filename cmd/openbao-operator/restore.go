package main

import (
	"context"
	"io"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/openbao/operator/internal/executor"
	"github.com/openbao/operator/internal/restore"
)

// runRestore is `openbao-operator restore ...`, the executor of a restore
// Job. Its outcome is the report in the termination log; the exit code
// says only whether it succeeded.
func runRestore(args []string, stderr io.Writer) error {
	cfg, err := restore.ParseExecutorArgs(args, stderr)
	if err != nil {
		return err
	}
	// Both reads stream through buffers of a few hundred KiB; nothing
	// holds the snapshot.
	debug.SetMemoryLimit(64 << 20)
	executor.ShedBinaryPages()
	log := zap.New(zap.WriteTo(stderr), zap.JSONEncoder()).WithName("restore").
		WithValues("namespace", cfg.Namespace, "cluster", cfg.Cluster, "restore", cfg.Restore)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	peakAnon := executor.SamplePeak(executor.AnonRSS, 50*time.Millisecond)
	report := executor.RunRestore(logr.NewContext(ctx, log), cfg, executorDeps())
	report.PeakAnonBytes = peakAnon()
	return reportAndExit(log, cfg.TerminationLog, report, "restore")
}
