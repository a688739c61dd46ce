//go:build !linux

package executor

// ShedBinaryPages does nothing where there is no /proc.
func ShedBinaryPages() {}
