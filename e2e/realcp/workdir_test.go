package realcp

import (
	"github.com/proxysim/proxysim/netns/workdir"
)

// A run keeps everything it writes (etcd's data, the API server's
// certificates, kube-proxy's configuration and binaries' PATH folder) in
// one folder under the temp directory (netns/workdir, as the VM runner
// does): a SIGKILLed run cannot clean up, so the next run's sweepWorkDirs
// removes the folders whose lock is free.
const workPrefix = "proxysim-realcp-"

func newWorkDir() (*workdir.Dir, error) { return workdir.New(workPrefix) }

// sweepWorkDirs removes the folders of runs that died without cleaning up,
// in dir (the temp directory), and reports them.
func sweepWorkDirs(dir string) ([]string, error) { return workdir.Sweep(dir, workPrefix) }
