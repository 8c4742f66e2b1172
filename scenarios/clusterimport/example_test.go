package clusterimport_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/proxysim/proxysim/scenarios/clusterimport"
)

// Import writes a scenario for one node of the testdata kubeadm cluster; the
// first replay fills its golden in, and the scenario replays green.
func ExampleImport() {
	dir, err := os.MkdirTemp("", "import")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	imp, err := clusterimport.Import(clusterimport.ImportOptions{
		Cluster: "../testdata/byoc/kubeadm/cluster.yaml",
		Config:  "../testdata/byoc/kubeadm/kube-proxy.yaml",
		Node:    "worker-1",
		Output:  filepath.Join(dir, "worker-1.yaml"),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	s := imp.Scenario
	fmt.Println(s.Proxy.Mode, s.Proxy.NodeName, len(s.Initial), "objects, passed:", imp.Result.Passed())
	// Output: ipvs worker-1 9 objects, passed: true
}
