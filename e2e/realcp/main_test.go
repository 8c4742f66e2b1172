package realcp

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/proxysim/proxysim/e2e/transcript"
	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/netns/workdir"
)

// runDir is this test process's folder (see workdir_test.go): TMPDIR
// points into it, so that every temp file of the API server and of the
// tests goes where the next run's sweep finds it if this one is killed.
var runDir *workdir.Dir

// hostTemp is the temp directory this process was given, before TMPDIR
// was pointed into runDir.
var hostTemp string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(mainWithSweep(m))
}

func mainWithSweep(m *testing.M) int {
	// The in-process API server logs through klog's globals.
	transcript.SilenceKlog()
	if netns.Privileged() {
		// What killed runs left: namespaces (named with their PID) and
		// temp folders (locked while their run lives).
		if gone, err := netns.Sweep(); err != nil {
			fmt.Fprintf(os.Stderr, "sweep namespaces: %v\n", err)
		} else if len(gone) > 0 {
			fmt.Fprintf(os.Stderr, "removed %d namespace(s) of killed runs\n", len(gone))
		}
	}
	if gone, err := sweepWorkDirs(os.TempDir()); err != nil {
		fmt.Fprintf(os.Stderr, "sweep temp folders: %v\n", err)
	} else if len(gone) > 0 {
		fmt.Fprintf(os.Stderr, "removed the temp folders of killed runs: %v\n", gone)
	}
	hostTemp = os.TempDir()
	var err error
	runDir, err = newWorkDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer runDir.Close()
	tmp := filepath.Join(runDir.Path, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Setenv("TMPDIR", tmp)
	return m.Run()
}
