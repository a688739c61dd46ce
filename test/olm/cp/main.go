// Command cp is the /bin/cp of the local OLM image. OLM's pods run cp from
// its own image (`cp -Rv /bin/cpb /util/cpb` before a bundle unpack,
// `cp /bin/copy-content ...` before a catalog extract); upstream's image
// takes it from busybox, and a single-layer image of static binaries has
// none. It copies files and, with -R, directories; an existing directory as
// the destination receives the sources by their base names.
package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	recursive, verbose := false, false
	var args []string
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			recursive = recursive || strings.ContainsAny(a, "Rr")
			verbose = verbose || strings.Contains(a, "v")
			continue
		}
		args = append(args, a)
	}
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cp [-Rv] SOURCE... DEST")
		os.Exit(2)
	}
	dst := args[len(args)-1]
	srcs := args[:len(args)-1]
	info, err := os.Stat(dst)
	intoDir := err == nil && info.IsDir()
	if len(srcs) > 1 && !intoDir {
		fail(fmt.Errorf("target %s is not a directory", dst))
	}
	for _, src := range srcs {
		to := dst
		if intoDir {
			to = filepath.Join(dst, filepath.Base(src))
		}
		if err := copyPath(src, to, recursive, verbose); err != nil {
			fail(err)
		}
	}
}

func copyPath(src, dst string, recursive, verbose bool) error {
	info, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return copyFile(src, dst, info.Mode().Perm(), verbose)
	}
	if !recursive {
		return fmt.Errorf("-R not specified; omitting directory %s", src)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(to, info.Mode().Perm())
		}
		return copyFile(p, to, info.Mode().Perm(), verbose)
	})
}

func copyFile(src, dst string, mode os.FileMode, verbose bool) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if verbose {
		fmt.Printf("'%s' -> '%s'\n", src, dst)
	}
	return out.Close()
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "cp: %v\n", err)
	os.Exit(1)
}
