package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const eks = "../../scenarios/testdata/byoc/eks/"
const eksNode = "ip-192-168-31-112.us-west-2.compute.internal"

// The three commands from a cluster to a replay: import writes a scenario
// that replays green, and says on stderr what it skipped and what is not
// modelled.
func TestImportThenReplay(t *testing.T) {
	out := filepath.Join(t.TempDir(), "scenario.yaml")
	code, stdout, stderr := runCLI("import", "--cluster", eks+"cluster.json", "--config", eks+"kube-proxy-config.yaml", "--node", eksNode, "-o", out)
	if code != exitPass || !strings.Contains(stdout, "wrote "+out+": node "+eksNode+", mode iptables, kube-proxy v1.29.10, 7 objects") || !strings.Contains(stdout, "PASS "+eksNode) {
		t.Fatalf("code %d\n%s%s", code, stdout, stderr)
	}
	for _, w := range []string{
		"warning: " + filepath.Dir(out) + "/cluster.json:454:9: (document 0).items[6]: skipped Deployment kube-system/coredns (apps/v1)",
		"kube-proxy-config.yaml:36:18: oomScoreAdj: not modelled by proxysim (mode iptables): -998 is ignored",
		"copied " + eks + "cluster.json to " + filepath.Dir(out) + "/cluster.json (a scenario reads only files in its folder)",
	} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	code, stdout, stderr = runCLI("replay", out)
	if code != exitPass || !strings.HasPrefix(stdout, "PASS "+eksNode) || !strings.Contains(stderr, "skipped CNINode") {
		t.Fatalf("replay: code %d\n%s%s", code, stdout, stderr)
	}
}

// --strict refuses a dump's objects of kinds proxysim does not model, at
// their file and line, before anything runs.
func TestStrictRefusesUnmodelledKinds(t *testing.T) {
	code, stdout, stderr := runCLI("replay", "--strict", eks+eksNode+".yaml")
	first, _, _ := strings.Cut(stderr, "\n")
	if code != exitInvalid || stdout != "" || !strings.HasPrefix(first, "../../scenarios/testdata/byoc/eks/cluster.json:454:9: (document 0).items[6].kind: Deployment kube-system/coredns (apps/v1) is of a kind proxysim does not model") {
		t.Fatalf("code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	out := filepath.Join(t.TempDir(), "s.yaml")
	code, _, stderr = runCLI("import", "--strict", "--cluster", eks+"cluster.json", "--config", eks+"kube-proxy-config.yaml", "--node", eksNode, "-o", out)
	if code != exitInvalid || !strings.Contains(stderr, "cluster.json:509:9: (document 0).items[7].kind: CNINode") {
		t.Fatalf("import --strict: code %d\n%s", code, stderr)
	}
	for _, f := range []string{out, filepath.Join(filepath.Dir(out), "cluster.json"), filepath.Join(filepath.Dir(out), "kube-proxy-config.yaml")} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("import --strict left %s behind from a dump it refused", f)
		}
	}
}

// A KubeProxyConfiguration with an unknown field or an invalid value exits
// 2 naming the file, line, column and field.
func TestBadKubeProxyConfigExitsTwo(t *testing.T) {
	for file, want := range map[string]string{
		"02-eks-udp-idle-timeout.yaml": "02-eks-udp-idle-timeout.conf.yaml:32:5: udpIdleTimeout: unknown field",
		"06-masquerade-bit-32.yaml":    "06-masquerade-bit-32.conf.yaml:5:18: iptables.masqueradeBit: must be within [0, 31], got 32",
	} {
		code, stdout, stderr := runCLI("validate", "../../scenarios/testdata/byoc/invalid/"+file)
		if code != exitInvalid || stdout != "" || !strings.HasPrefix(stderr, "../../scenarios/testdata/byoc/invalid/"+want) {
			t.Errorf("%s: code %d\n%s%s", file, code, stdout, stderr)
		}
	}
	code, _, stderr := runCLI("import", "--cluster", eks+"cluster.json", "--config", "../../scenarios/testdata/byoc/invalid/03-userspace-mode.conf.yaml", "--node", eksNode, "-o", filepath.Join(t.TempDir(), "s.yaml"))
	if code != exitInvalid || !strings.Contains(stderr, "03-userspace-mode.conf.yaml:3:7: mode: must be iptables, ipvs, nftables or blank") {
		t.Fatalf("import: code %d\n%s", code, stderr)
	}
	code, _, stderr = runCLI("import", "--cluster", eks+"cluster.json", "--config", eks+"kube-proxy-config.yaml", "--node", "nope", "-o", filepath.Join(t.TempDir(), "s.yaml"))
	if code != exitInvalid || !strings.Contains(stderr, `no Node "nope" (nodes: `+eksNode+")") {
		t.Fatalf("unknown node: code %d\n%s", code, stderr)
	}
}
