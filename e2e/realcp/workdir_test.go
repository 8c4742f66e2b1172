package realcp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A run keeps everything it writes (etcd's data, the API server's
// certificates, kube-proxy's configuration and binaries' PATH folder) in
// one folder under the temp directory, named workPrefix + its PID + "-" +
// a random suffix, holding a file "lock" it keeps flock'ed while it
// lives: a SIGKILLed run cannot clean up, so the next run's sweepWorkDirs
// removes the folders whose lock is free (the kernel drops it with the
// process). The same scheme as netns/vm's (workdir.go there).
const workPrefix = "proxysim-realcp-"

const lockName = "lock"

type workDir struct {
	path string
	lock *os.File
}

func newWorkDir() (*workDir, error) {
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", workPrefix, os.Getpid()))
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
	return &workDir{path: dir, lock: f}, nil
}

func (w *workDir) Close() error {
	err := os.RemoveAll(w.path)
	return errors.Join(err, w.lock.Close())
}

// sweepWorkDirs removes the folders of runs that died without cleaning up,
// in dir (the temp directory), and reports them.
func sweepWorkDirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		pid, ok := ownerPID(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		stale, err := abandoned(p, pid)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !stale {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}

func ownerPID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, workPrefix)
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

func abandoned(dir string, pid int) (bool, error) {
	f, err := os.Open(filepath.Join(dir, lockName))
	if errors.Is(err, os.ErrNotExist) {
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

func running(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
