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

// A KubeProxyConfiguration with an invalid value exits 2 naming the file,
// line, column and field; one with an unknown field does too under
// --strict, and validates (exit 0, with a warning) without it, as
// kube-proxy runs with it.
func TestBadKubeProxyConfigExitsTwo(t *testing.T) {
	const testdata = "../../scenarios/testdata/byoc/"
	for _, c := range []struct {
		file string
		args []string
		code int
		want string
	}{
		{"lenient/02-eks-udp-idle-timeout.yaml", []string{"--strict"}, exitInvalid, "lenient/02-eks-udp-idle-timeout.conf.yaml:32:5: udpIdleTimeout: unknown field"},
		{"lenient/02-eks-udp-idle-timeout.yaml", nil, exitPass, "warning: " + testdata + "lenient/02-eks-udp-idle-timeout.conf.yaml:32:5: udpIdleTimeout: unknown field \"udpIdleTimeout\" in KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1): kube-proxy decodes the file leniently and runs without it (--strict refuses it)\n"},
		{"invalid/06-masquerade-bit-32.yaml", nil, exitInvalid, "invalid/06-masquerade-bit-32.conf.yaml:5:18: iptables.masqueradeBit: must be within [0, 31], got 32"},
		// Read leniently, the bad value beside the unknown field is still refused.
		{"invalid/14-unknown-field-and-bad-value.yaml", nil, exitInvalid, "invalid/14-unknown-field-and-bad-value.conf.yaml:7:18: iptables.masqueradeBit: must be within [0, 31], got 32"},
	} {
		code, stdout, stderr := runCLI(append(append([]string{"validate"}, c.args...), testdata+c.file)...)
		ok := strings.HasPrefix(stderr, testdata+c.want) && stdout == ""
		if c.code == exitPass {
			ok = strings.Contains(stderr, c.want) && strings.HasPrefix(stdout, "ok ")
		}
		if code != c.code || !ok {
			t.Errorf("validate %v %s: code %d, want %d\n%s%s", c.args, c.file, code, c.code, stdout, stderr)
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

// kubeadm's ConfigMap with a misspelled field imports and replays, as
// kube-proxy runs with it: the warning names the field at its line in the
// ConfigMap (config.conf's text starts on line 3) and the field meant;
// --strict refuses it, exit 2 at the same place, leaving nothing behind.
func TestImportLenientConfigMap(t *testing.T) {
	const kubeadm = "../../scenarios/testdata/byoc/kubeadm/"
	const config = "../../scenarios/testdata/byoc/lenient/03-kubeadm-misspelled-scheduler.conf.yaml"
	dir := t.TempDir()
	out := filepath.Join(dir, "s.yaml")
	code, stdout, stderr := runCLI("import", "--cluster", kubeadm+"cluster.yaml", "--config", config, "--node", "worker-1", "-o", out)
	want := "warning: " + dir + "/03-kubeadm-misspelled-scheduler.conf.yaml:39:7: ipvs.schedular: unknown field \"schedular\" in KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1): kube-proxy decodes the file leniently and runs without it (--strict refuses it); did you mean \"scheduler\"?\n"
	if code != exitPass || !strings.Contains(stdout, "mode ipvs,") || !strings.Contains(stdout, "PASS worker-1") || !strings.Contains(stderr, want) {
		t.Fatalf("import: code %d\n%s%s\nwant on stderr: %s", code, stdout, stderr, want)
	}
	// The scenario replays with the scheduler kube-proxy runs: rr, the
	// misspelled wrr dropped.
	code, stdout, stderr = runCLI("replay", "-v", out)
	if code != exitPass || !strings.Contains(stderr, want) {
		t.Fatalf("replay: code %d\n%s%s", code, stdout, stderr)
	}
	if text, _ := os.ReadFile(out); !strings.Contains(string(text), ":443 rr\n") || strings.Contains(string(text), " wrr\n") {
		t.Errorf("the golden does not show the rr scheduler:\n%s", text)
	}

	strictDir := t.TempDir()
	code, stdout, stderr = runCLI("import", "--strict", "--cluster", kubeadm+"cluster.yaml", "--config", config, "--node", "worker-1", "-o", filepath.Join(strictDir, "s.yaml"))
	if code != exitInvalid || stdout != "" || !strings.HasPrefix(stderr, strictDir+"/03-kubeadm-misspelled-scheduler.conf.yaml:39:7: ipvs.schedular: unknown field \"schedular\"") || !strings.Contains(stderr, "refused by --strict") {
		t.Fatalf("import --strict: code %d\n%s%s", code, stdout, stderr)
	}
	if left, _ := os.ReadDir(strictDir); len(left) != 0 {
		t.Errorf("import --strict left %v behind", left)
	}
	code, _, stderr = runCLI("validate", "--strict", out)
	if code != exitInvalid || !strings.HasPrefix(stderr, dir+"/03-kubeadm-misspelled-scheduler.conf.yaml:39:7: ipvs.schedular: ") {
		t.Fatalf("validate --strict: code %d\n%s", code, stderr)
	}
}
