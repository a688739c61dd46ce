package executor

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

func sha256Of(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// SleepContext waits d or until ctx ends.
func SleepContext(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// PeakRSS reads the process's peak resident set (VmHWM) from
// /proc/self/status; 0 where there is none. It counts the pages of the
// binary itself that are mapped, which for the operator's large binary are
// most of it.
func PeakRSS() int64 { return procStatus("VmHWM:") }

// AnonRSS reads the process's anonymous resident memory (RssAnon): the
// heap, stacks and part buffers, without the binary's own pages.
func AnonRSS() int64 { return procStatus("RssAnon:") }

func procStatus(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// SamplePeak reads sample every interval until stop is called, and stop
// returns the largest value seen.
func SamplePeak(sample func() int64, interval time.Duration) (stop func() int64) {
	done := make(chan struct{})
	result := make(chan int64, 1)
	go func() {
		peak := sample()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				peak = max(peak, sample())
			case <-done:
				result <- max(peak, sample())
				return
			}
		}
	}()
	return func() int64 { close(done); return <-result }
}
