package main

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
)

// The container's memory limit, as cgroup v2 and v1 show it inside the
// container.
const (
	cgroupV2MemoryMax = "/sys/fs/cgroup/memory.max"
	cgroupV1MemoryMax = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
)

// softMemoryLimit is the Go runtime's soft memory limit for this process:
// none when GOMEMLIMIT is set (the runtime reads it itself) or the
// container has no memory limit; else 90% of the limit (the rest for what
// the runtime does not count: the binary's text, its connections' kernel
// buffers). Left
// alone, the runtime lets the heap grow to twice what is live before it
// collects, so an operator whose live heap fits its limit can still be
// killed for memory at a peak (bench-scale-tenancy, run without a limit:
// 230 MiB live at the end, a peak RSS of 776 MiB).
func softMemoryLimit(gomemlimit string, readFile func(string) ([]byte, error)) (limit, container int64, ok bool) {
	if gomemlimit != "" {
		return 0, 0, false
	}
	for _, path := range []string{cgroupV2MemoryMax, cgroupV1MemoryMax} {
		data, err := readFile(path)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(data))
		n, err := strconv.ParseInt(v, 10, 64)
		// "max" (v2) or the page-rounded largest int64 (v1): no limit.
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0, 0, false
		}
		return n - n/10, n, true
	}
	return 0, 0, false
}

// applySoftMemoryLimit sets softMemoryLimit and says so.
func applySoftMemoryLimit(log logr.Logger) {
	limit, container, ok := softMemoryLimit(os.Getenv("GOMEMLIMIT"), os.ReadFile)
	if !ok {
		return
	}
	debug.SetMemoryLimit(limit)
	log.Info("soft memory limit set from the container's", "limitBytes", limit, "containerLimitBytes", container)
}
