// Package workdir gives a run its own temp folder that a SIGKILLed run
// cannot leave behind for good: the folder is named prefix + the owner's
// PID + "-" + a random suffix and holds a file "lock" that the owner keeps
// flock'ed for as long as it runs, so Sweep can tell a dead run's folder
// (the kernel drops the lock with the process) from a live one. The VM
// runner (netns/vm) and the real control plane (e2e/realcp) use it.
package workdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const lockName = "lock"

// Dir is a run's temp folder, locked while the run lives.
type Dir struct {
	Path string
	lock *os.File
}

// New makes a run's temp folder, named prefix + PID + "-" + a random
// suffix in the temp directory, and takes its lock.
func New(prefix string) (*Dir, error) {
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", prefix, os.Getpid()))
	if err != nil {
		return nil, err
	}
	// The lock gets its name only once held: a sweeper never sees it free
	// while its owner lives.
	tmp := filepath.Join(dir, lockName+".new")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			err = os.Rename(tmp, filepath.Join(dir, lockName))
		}
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("lock the run's temp folder: %w", err)
	}
	return &Dir{Path: dir, lock: f}, nil
}

// Close removes the folder, then lets go of its lock.
func (w *Dir) Close() error {
	err := os.RemoveAll(w.Path)
	return errors.Join(err, w.lock.Close())
}

// Sweep removes the folders named with prefix that runs killed before they
// could clean up left in tmp, and reports them. A folder whose run is alive
// (its lock held, or, before it has one, its PID running) is kept, as is
// anything not named the way New names folders.
func Sweep(tmp, prefix string) ([]string, error) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		pid, ok := ownerPID(prefix, e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		stale, err := abandoned(dir, pid)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !stale {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, dir)
	}
	return removed, errors.Join(errs...)
}

// ownerPID reads the PID from a folder name New made with prefix.
func ownerPID(prefix, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	p, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(p)
	return pid, err == nil && pid > 0
}

// abandoned reports whether a run's folder outlived its owner.
func abandoned(dir string, pid int) (bool, error) {
	f, err := os.Open(filepath.Join(dir, lockName))
	if errors.Is(err, os.ErrNotExist) {
		// made but not locked yet, or its owner died in between
		return !running(pid), nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); {
	case err == nil:
		return true, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return false, nil
	default:
		return false, fmt.Errorf("lock %s: %w", dir, err)
	}
}

// running reports whether a process exists (EPERM: it does, someone else's).
func running(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
