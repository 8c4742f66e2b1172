package ipvsmode_test

import (
	"strings"
	"testing"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/ipvsmode"
	"github.com/proxysim/proxysim/scenarios/replay"
)

// The kernels of the VM matrix as netns.KernelVersion reports them (read in
// the VM on 2026-11-28). Every kernel-suite scenario passes on each of them
// there, so the fake told any of these versions must pass it too; the VM run
// checks the same for the kernel it boots (e2e, fakeAsThisKernel).
var matrixKernels = []string{
	"5.10.0-46-cloud-amd64 (5.10.262)",
	"6.1.0-56-cloud-amd64 (6.1.192)",
	"6.12.118+deb13-cloud-amd64 (6.12.118)",
}

func TestKernelSuiteOnTheMatrixKernels(t *testing.T) {
	var names []string
	for _, n := range scenarios.LibraryNames() {
		if strings.HasPrefix(n, "kernel-suite/") {
			names = append(names, n)
		}
	}
	if len(names) < 10 {
		t.Fatalf("found %d kernel-suite scenarios", len(names))
	}
	for _, kernel := range matrixKernels {
		for _, name := range names {
			s, err := scenarios.LoadLibrary(name)
			if err != nil {
				t.Fatal(err)
			}
			set, _ := ipvsmode.SettingsOf(s)
			set.Kernel = kernel
			res, err := replay.Replay(s, replay.Options{})
			if err != nil {
				t.Fatalf("%s as %s: %v", name, kernel, err)
			}
			for _, f := range res.Failures {
				t.Errorf("%s as kernel %s: %s: want %s, got %s", name, kernel, f.Pos.Path, f.Expected, f.Got)
			}
		}
	}
}
