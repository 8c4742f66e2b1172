package scenarios

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// MaxFileBytes bounds every file a scenario reads or --update writes: the
// scenario itself, its manifest files and its goldens. A 50 MB cluster dump
// fits; /dev/zero does not.
const MaxFileBytes = 64 << 20

// Reference errors. Each is reported at the field that named the file.
var (
	ErrOutside    = errors.New("leads outside the scenario's folder")
	ErrNotRegular = errors.New("is not a regular file")
	ErrTooLarge   = fmt.Errorf("is larger than %d MiB", MaxFileBytes>>20)
)

// folder is where a scenario lives. Every path a scenario names is read and
// written through it, so that no reference reaches outside: os.Root enforces
// it for every path component, symlinks included, on each access.
type folder struct {
	dir string // an OS directory, or "" for fsys

	fsys fs.FS // the embedded library
	base string
}

func osFolder(dir string) folder           { return folder{dir: dir} }
func fsFolder(f fs.FS, base string) folder { return folder{fsys: f, base: base} }

// checkLocal refuses, before any file system access, what cannot name a file
// inside the folder: absolute paths and paths climbing out with "..".
func checkLocal(rel string) error {
	switch {
	case rel == "":
		return errors.New("empty path")
	case strings.ContainsRune(rel, 0):
		return errors.New("path holds a NUL byte")
	case filepath.IsAbs(rel):
		return fmt.Errorf("%s %w: absolute paths are refused, name a file relative to the scenario", rel, ErrOutside)
	case !filepath.IsLocal(rel):
		return fmt.Errorf("%s %w", rel, ErrOutside)
	}
	return nil
}

// read returns the content of rel: a regular file inside the folder (after
// symlinks), of at most MaxFileBytes.
func (f folder) read(rel string) ([]byte, error) {
	if err := checkLocal(rel); err != nil {
		return nil, err
	}
	if f.fsys != nil {
		name := path.Join(f.base, filepath.ToSlash(rel))
		fi, err := fs.Stat(f.fsys, name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rel, unwrapPathError(err))
		}
		if err := readable(rel, fi); err != nil {
			return nil, err
		}
		return fs.ReadFile(f.fsys, name)
	}
	root, err := os.OpenRoot(f.dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.dir, unwrapPathError(err))
	}
	defer root.Close()
	fi, err := root.Stat(rel)
	if err != nil {
		return nil, f.explain(rel, err)
	}
	if err := readable(rel, fi); err != nil {
		return nil, err
	}
	// O_NONBLOCK: should the file be swapped for a pipe after the check, the
	// open must not wait for a writer.
	fh, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, f.explain(rel, err)
	}
	defer fh.Close()
	if fi, err := fh.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s %w", rel, ErrNotRegular)
	}
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, unwrapPathError(err))
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s %w", rel, ErrTooLarge)
	}
	return data, nil
}

// check reports whether rel may be read (or, when it does not exist yet,
// created by --update) without reading it.
func (f folder) check(rel string) error {
	if err := checkLocal(rel); err != nil {
		return err
	}
	if f.fsys != nil {
		return nil
	}
	root, err := os.OpenRoot(f.dir)
	if err != nil {
		return unwrapPathError(err)
	}
	defer root.Close()
	fi, err := root.Stat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A golden that does not exist yet: --update may create it. Its
		// folder must still be inside.
		if d := filepath.Dir(rel); d != "." {
			if _, err := root.Stat(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return f.explain(rel, err)
			}
		}
		return nil
	case err != nil:
		return f.explain(rel, err)
	}
	return readable(rel, fi)
}

// readable refuses what a scenario may not read: anything but a regular
// file, or one over MaxFileBytes.
func readable(rel string, fi fs.FileInfo) error {
	switch {
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s %w (%s)", rel, ErrNotRegular, modeName(fi.Mode()))
	case fi.Size() > MaxFileBytes:
		return fmt.Errorf("%s %w", rel, ErrTooLarge)
	}
	return nil
}

var tmpSeq atomic.Int64

// write replaces rel atomically: a temporary file beside it, then a rename.
// It writes only a regular file inside the folder (never through a symlink),
// or creates one there.
func (f folder) write(rel string, data []byte) error {
	if err := checkLocal(rel); err != nil {
		return err
	}
	if f.fsys != nil {
		return fmt.Errorf("%s: the bundled library is read-only", rel)
	}
	if len(data) > MaxFileBytes {
		return fmt.Errorf("%s: new content %w", rel, ErrTooLarge)
	}
	root, err := os.OpenRoot(f.dir)
	if err != nil {
		return unwrapPathError(err)
	}
	defer root.Close()
	mode := fs.FileMode(0o644)
	fi, err := root.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return f.explain(rel, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symlink: --update rewrites only regular files", rel)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s %w (%s)", rel, ErrNotRegular, modeName(fi.Mode()))
	default:
		mode = fi.Mode().Perm()
	}
	tmp := filepath.Join(filepath.Dir(rel), "."+filepath.Base(rel)+".proxysim-"+strconv.Itoa(os.Getpid())+"-"+strconv.FormatInt(tmpSeq.Add(1), 10))
	fh, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return f.explain(rel, err)
	}
	_, err = fh.Write(data)
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return unwrapPathError(err)
	}
	return nil
}

// explain turns os.Root's refusal into a message that says where the path
// leads.
func (f folder) explain(rel string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: no such file in %s", rel, f.dir)
	}
	if strings.Contains(err.Error(), "escapes") {
		where := ""
		if real, e := filepath.EvalSymlinks(filepath.Join(f.dir, rel)); e == nil {
			where = " (it resolves to " + real + ")"
		}
		return fmt.Errorf("%s %w%s", rel, ErrOutside, where)
	}
	return fmt.Errorf("%s: %w", rel, unwrapPathError(err))
}

func modeName(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "not a regular file"
}

// readScenarioFile reads a scenario named on the command line, with the same
// bounds as the files it names.
func readScenarioFile(file string) ([]byte, error) {
	return osFolder(filepath.Dir(file)).read(filepath.Base(file))
}

// noFiles is the folder of a scenario parsed from memory: it names no files.
type noFiles struct{}

func (noFiles) Open(name string) (fs.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// ReadFile reads rel, a file the scenario names (a golden file), from the
// scenario's folder.
func (s *Scenario) ReadFile(rel string) ([]byte, error) { return s.folder.read(rel) }

// WriteFile replaces rel in the scenario's folder atomically (--update's
// golden files and, as OwnFile, the scenario itself).
func (s *Scenario) WriteFile(rel string, data []byte) error { return s.folder.write(rel, data) }

// OwnFile is the scenario's own name in its folder; "" for a scenario
// parsed from memory, which cannot be rewritten.
func (s *Scenario) OwnFile() string { return s.base }

// Source is the scenario file as it was read.
func (s *Scenario) Source() []byte { return s.source }
