package netns

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// A sweep leaves the namespaces of another running process alone, and
// takes those of this process, of a dead one, and of older names without
// a process ID.
func TestSweepSparesOtherLiveProcesses(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		fmt.Sprintf("%snode-%d-0a1b2c3d", Prefix, os.Getpid()):      false,
		fmt.Sprintf("%snode-%d-0a1b2c3d", Prefix, 1):                true,
		fmt.Sprintf("%snode-%d-0a1b2c3d", Prefix, dead.Process.Pid): false,
		Prefix + "node-0a1b2c3d":                                    false,
		fmt.Sprintf("%sbackend1-%d-0a1b2c3d", Prefix, os.Getppid()): true,
	} {
		if got := ownedByAnotherLiveProcess(name); got != want {
			t.Errorf("%s: owned by another live process %v, want %v", name, got, want)
		}
	}
}
