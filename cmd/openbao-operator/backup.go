package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/openbao/operator/internal/backup"
	"github.com/openbao/operator/internal/executor"
	"github.com/openbao/operator/internal/objectstore/open"
	"github.com/openbao/operator/internal/openbao"
)

// runBackup is `openbao-operator backup ...`, the executor of a backup
// Job. Its outcome is the report in the termination log; the exit code
// says only whether it succeeded.
func runBackup(args []string, stderr io.Writer) error {
	cfg, err := backup.ParseExecutorArgs(args, stderr)
	if err != nil {
		return err
	}
	// The parts are the memory that matters; the rest is small. A soft
	// limit a little above them keeps the collector from letting garbage
	// grow the resident set.
	debug.SetMemoryLimit(cfg.PartSize*int64(cfg.Concurrency) + 24<<20)
	executor.ShedBinaryPages()
	log := zap.New(zap.WriteTo(stderr), zap.JSONEncoder()).WithName("backup").
		WithValues("namespace", cfg.Namespace, "cluster", cfg.Cluster, "backup", cfg.Backup)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	peakAnon := executor.SamplePeak(executor.AnonRSS, 50*time.Millisecond)
	report := executor.Run(logr.NewContext(ctx, log), cfg, executorDeps())
	report.PeakAnonBytes = peakAnon()
	return reportAndExit(log, cfg.TerminationLog, report, "backup")
}

// executorDeps are the real I/O of the backup and restore executors.
func executorDeps() executor.Deps {
	return executor.Deps{
		OpenBao:  openbao.New,
		NewStore: open.Store,
		ReadFile: os.ReadFile,
		Clock:    clock.RealClock{},
		Random:   rand.Reader,
		Sleep:    executor.SleepContext,
		PeakRSS:  executor.PeakRSS,
	}
}

// reportAndExit writes an executor's report to the Job's termination log,
// where the operator reads it; the error says only whether it succeeded.
func reportAndExit(log logr.Logger, path string, report backup.Report, what string) error {
	if err := os.WriteFile(path, report.Encode(), 0o644); err != nil {
		log.Error(err, "write the report", "path", path)
	}
	if report.Failed() {
		return fmt.Errorf("%s failed: %s", what, report.Reason)
	}
	return nil
}
