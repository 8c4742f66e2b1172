package clusterimport_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/clusterimport"
	_ "github.com/proxysim/proxysim/scenarios/iptablesmode"
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"
	_ "github.com/proxysim/proxysim/scenarios/nftablesmode"
	"github.com/proxysim/proxysim/scenarios/replay"
)

// clusters are the testdata clusters: a dump, a kube-proxy configuration,
// and the node imported.
var clusters = []struct {
	dir, dump, config, node, mode, scenario string
	objects                                 int
	skipped                                 []string
}{
	{"kubeadm", "cluster.yaml", "kube-proxy.yaml", "worker-1", "ipvs", "worker-1.yaml", 9, nil},
	{"kind", "cluster.yaml", "kube-proxy.yaml", "kind-worker", "iptables", "kind-worker.yaml", 6, nil},
	{"kind", "cluster.yaml", "kube-proxy-nftables.yaml", "kind-worker", "nftables", "kind-worker-nftables.yaml", 6, nil},
	{"eks", "cluster.json", "kube-proxy-config.yaml", "ip-192-168-31-112.us-west-2.compute.internal", "iptables", "ip-192-168-31-112.us-west-2.compute.internal.yaml", 7,
		[]string{"cluster.json:454:9: (document 0).items[6]: skipped Deployment kube-system/coredns (apps/v1)",
			"cluster.json:509:9: (document 0).items[7]: skipped CNINode ip-192-168-31-112.us-west-2.compute.internal (vpcresources.k8s.aws/v1alpha1)"}},
}

// Import on each testdata cluster writes a scenario that validates and
// replays green, with a golden filled in, and the committed ones replay.
func TestImportTestdataClusters(t *testing.T) {
	for _, c := range clusters {
		t.Run(c.dir+"-"+c.mode, func(t *testing.T) {
			src := filepath.Join("../testdata/byoc", c.dir)
			out := filepath.Join(t.TempDir(), "scenario.yaml")
			imp, err := clusterimport.Import(clusterimport.ImportOptions{
				Cluster: filepath.Join(src, c.dump), Config: filepath.Join(src, c.config), Node: c.node, Output: out,
			})
			if err != nil {
				t.Fatal(err)
			}
			s := imp.Scenario
			if !imp.Result.Passed() || s.Proxy.Mode != c.mode || len(s.Initial) != c.objects || s.Proxy.NodeName != c.node || len(imp.Copied) != 2 {
				t.Fatalf("passed %v, mode %s, %d objects, node %s, copied %v", imp.Result.Passed(), s.Proxy.Mode, len(s.Initial), s.Proxy.NodeName, imp.Copied)
			}
			text, _ := os.ReadFile(out)
			if !strings.Contains(string(text), "  - file: "+c.dump+"\n") || !strings.Contains(string(text), "  # - at: 5s\n") {
				t.Errorf("skeleton lacks the objects file or the example step:\n%s", text)
			}
			// The golden was filled in: the first sync's dataplane, not empty.
			if !strings.Contains(string(text), "10.96.0.1") && !strings.Contains(string(text), "10.100.0.1") {
				t.Errorf("golden not filled in:\n%s", text)
			}
			var skipped []string
			for _, w := range imp.Warnings {
				if strings.Contains(w.Msg, "skipped") {
					skipped = append(skipped, w.Error())
				}
			}
			if len(skipped) != len(c.skipped) {
				t.Fatalf("skipped %q, want %q", skipped, c.skipped)
			}
			for i, w := range c.skipped {
				if !strings.HasSuffix(filepath.ToSlash(skipped[i]), w+": proxysim does not model this kind") && !strings.Contains(filepath.ToSlash(skipped[i]), w) {
					t.Errorf("skipped[%d] = %s, want ...%s", i, skipped[i], w)
				}
			}
			// The scenario committed beside the testdata replays green too.
			committed := filepath.Join(src, c.scenario)
			cs, err := scenarios.Load(committed)
			if err != nil {
				t.Fatal(err)
			}
			res, err := replay.Replay(cs, replay.Options{})
			if err != nil || !res.Passed() {
				t.Fatalf("%s: %v %v", committed, err, res.Failures)
			}
		})
	}
}
