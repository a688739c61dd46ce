package baotest

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// WriteSecretVolume updates dir the way the kubelet updates a Secret volume
// (its AtomicWriter): the files go into a fresh hidden directory, a
// temporary `..data_tmp` symlink to it is renamed over `..data` in one
// step, and each visible name is a symlink through `..data`. A reader
// therefore sees either the old set of files or the new one, never a mix.
func WriteSecretVolume(dir string, files map[string][]byte) error {
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	stamp := fmt.Sprintf("..%s.%d", time.Now().UTC().Format("2006_01_02_15_04_05"), time.Now().UnixNano())
	if err := os.MkdirAll(filepath.Join(dir, stamp), 0o755); err != nil {
		return fmt.Errorf("write secret volume: %w", err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, stamp, name), data, 0o600); err != nil {
			return fmt.Errorf("write secret volume: %w", err)
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(stamp, tmp); err != nil {
		return fmt.Errorf("write secret volume: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		return fmt.Errorf("write secret volume: %w", err)
	}
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			return fmt.Errorf("write secret volume: %w", err)
		}
	}
	if old != "" {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}
