package vm

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Files are host files and folders to copy into the guest, each under its
// own folder in /work, so the binary's arguments can name their copies. The
// zero value is empty and ready to use.
type Files struct {
	copies  map[string]string // guest path (relative to /) -> host file
	folders map[string]string // host folder (absolute) -> guest folder
	n       int
}

// AddFolder copies the host folder dir, with everything below it, and
// returns its path in the guest. Adding the same folder again returns the
// same path and copies nothing more.
func (f *Files) AddFolder(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if g, ok := f.folders[abs]; ok {
		return g, nil
	}
	guest := f.next()
	copies := map[string]string{}
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(abs, p)
		if err != nil {
			return err
		}
		copies[path.Join(guest, filepath.ToSlash(rel))] = p
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("copy %s into the VM: %w", dir, err)
	}
	f.init()
	for g, h := range copies {
		f.copies[g] = h
	}
	f.folders[abs] = "/" + guest
	return "/" + guest, nil
}

// AddFile copies one host file and returns its path in the guest (same
// base name, in a folder of its own).
func (f *Files) AddFile(file string) (string, error) {
	st, err := os.Stat(file)
	if err != nil {
		return "", fmt.Errorf("copy %s into the VM: %w", file, err)
	}
	if st.IsDir() {
		return "", fmt.Errorf("copy %s into the VM: a folder (use AddFolder)", file)
	}
	guest := path.Join(f.next(), filepath.Base(file))
	f.init()
	f.copies[guest] = file
	return "/" + guest, nil
}

func (f *Files) next() string {
	g := fmt.Sprintf("work/%d", f.n)
	f.n++
	return g
}

func (f *Files) init() {
	if f.copies == nil {
		f.copies = map[string]string{}
		f.folders = map[string]string{}
	}
}

// HostPath is the host file a guest path (as the binary in the guest names
// it, /work/N/...) was copied from, so results can name the user's files.
func (f *Files) HostPath(guest string) (string, bool) {
	h, ok := f.copies[strings.TrimPrefix(path.Clean(guest), "/")]
	return h, ok
}
