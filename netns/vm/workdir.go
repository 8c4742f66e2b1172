package vm

import (
	"os"

	"github.com/proxysim/proxysim/netns/workdir"
)

// WorkPrefix names a run's temp folder (netns/workdir: + the owner's PID +
// "-" + a random suffix, locked while the run lives).
const WorkPrefix = "proxysim-vm-"

// Sweep removes the temp folders that VM runs killed before they could
// clean up left in the temp directory, and reports them.
func Sweep() ([]string, error) { return workdir.Sweep(os.TempDir(), WorkPrefix) }
