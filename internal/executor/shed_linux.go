package executor

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ShedBinaryPages drops from the process's resident set the pages of its
// own executable's read-only mappings (code and read-only data). The
// operator's binary holds the manager, the chart renderer and the
// executor; starting it maps most of its 60 MB, of which a backup uses a
// few. The pages stay in the page cache and fault back in when touched;
// dropping them only stops the resident set from carrying the rest. The
// writable data mapping is left alone: dropping it would lose its state.
func ShedBinaryPages() {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(s.Text())
		if len(fields) < 6 || fields[5] != exe || strings.Contains(fields[1], "w") {
			continue
		}
		bounds := strings.SplitN(fields[0], "-", 2)
		start, err1 := strconv.ParseUint(bounds[0], 16, 64)
		end, err2 := strconv.ParseUint(bounds[1], 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), syscall.MADV_DONTNEED)
	}
}
