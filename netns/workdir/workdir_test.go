package workdir

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
)

// WorkPrefix names the folders of this test.
const WorkPrefix = "proxysim-test-"

// Sweep removes exactly the folders of runs that are gone: a held lock, or a
// live owner before it has one, keeps a folder; names it did not make are
// never touched.
func TestSweepRemovesOnlyDeadRunsFolders(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	live, err := New(WorkPrefix)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()

	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	deadPID := gone.Process.Pid
	mk := func(name string, lock bool) string {
		dir := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(dir, "run"), 0o755); err != nil {
			t.Fatal(err)
		}
		if lock {
			if err := os.WriteFile(filepath.Join(dir, lockName), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	me := os.Getpid()
	// a free lock means its owner is gone, whatever runs under its PID now
	freeLock := mk(fmt.Sprintf("%s%d-1", WorkPrefix, me), true)
	deadNoLock := mk(fmt.Sprintf("%s%d-2", WorkPrefix, deadPID), false)
	// an owner between making its folder and taking the lock
	creating := mk(fmt.Sprintf("%s%d-3", WorkPrefix, me), false)
	foreign := []string{
		mk(WorkPrefix+"123456789", false), // another naming (an older proxysim)
		mk(WorkPrefix+"x-1", false),
		mk("other-1-2", false),
	}
	if err := os.WriteFile(filepath.Join(tmp, fmt.Sprintf("%s%d-4", WorkPrefix, deadPID)), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	removed, err := Sweep(tmp, WorkPrefix)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(removed)
	want := []string{freeLock, deadNoLock}
	sort.Strings(want)
	if fmt.Sprint(removed) != fmt.Sprint(want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	for _, d := range append([]string{live.Path, creating}, foreign...) {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
	for _, d := range want {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", d, err)
		}
	}
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(live.Path); !os.IsNotExist(err) {
		t.Fatalf("Close left %s: %v", live.Path, err)
	}
}
