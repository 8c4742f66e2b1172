package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestReplayBundledScenarioPasses(t *testing.T) {
	code, out, errs := runCLI("replay", "initial-sync-gating")
	if code != exitPass || !strings.HasPrefix(out, "PASS initial-sync-gating") {
		t.Fatalf("code %d\n%s%s", code, out, errs)
	}
}

func TestFailedExpectationExitsOneAndExplains(t *testing.T) {
	code, out, _ := runCLI("replay", "../../scenarios/testdata/failing/wrong-expectations.yaml")
	if code != exitFail {
		t.Fatalf("code %d, want %d\n%s", code, exitFail, out)
	}
	for _, want := range []string{
		"FAIL wrong-expectations",
		"wrong-expectations.yaml:11:", "syncs.count, at 2s", "expected: 3", "got:      1 ([0s])",
		"table differs (- expected, + got):", "- TCP  10.96.0.10:80 wrr", "+ TCP  10.96.0.10:80 rr",
		"trace leading to it:", "run.start",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestInvalidScenariosExitTwoNamingLineAndField(t *testing.T) {
	files, _ := filepath.Glob("../../scenarios/testdata/invalid/*.yaml")
	if len(files) < 20 {
		t.Fatalf("%d invalid files", len(files))
	}
	for _, f := range files {
		want := wantLine(t, f)
		for _, cmd := range []string{"validate", "replay"} {
			code, out, errs := runCLI(cmd, f)
			if code != exitInvalid {
				t.Errorf("%s %s: code %d, want %d\n%s%s", cmd, f, code, exitInvalid, out, errs)
			}
			if out != "" {
				t.Errorf("%s %s: something ran:\n%s", cmd, f, out)
			}
			if !strings.Contains(errs, want) {
				t.Errorf("%s %s: stderr lacks %q:\n%s", cmd, f, want, errs)
			}
		}
	}
}

// One bad file among good ones rejects the whole command: nothing half-applied.
func TestOneInvalidFileRunsNothing(t *testing.T) {
	code, out, _ := runCLI("replay", "initial-sync-gating", "../../scenarios/testdata/invalid/05-missing-version.yaml")
	if code != exitInvalid || out != "" {
		t.Fatalf("code %d, out %q", code, out)
	}
}

func wantLine(t *testing.T, file string) string {
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Scan()
	lc, path, _ := strings.Cut(strings.TrimPrefix(sc.Text(), "# want: "), " ")
	return file + ":" + lc + ": " + path
}

func TestUpdateRewritesGoldens(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("../../scenarios/testdata/golden-update.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "golden-update.yaml")
	if err := os.WriteFile(file, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runCLI("replay", file); code != exitFail {
		t.Fatalf("stale goldens passed: %d\n%s%s", code, out, errs)
	}
	if code, out, errs := runCLI("replay", "--update", file); code != exitPass {
		t.Fatalf("--update: %d\n%s%s", code, out, errs)
	}
	if code, out, errs := runCLI("replay", file); code != exitPass {
		t.Fatalf("after --update: %d\n%s%s", code, out, errs)
	}
	rewritten, _ := os.ReadFile(file)
	if !strings.Contains(string(rewritten), "      ipvs: |\n        Prot LocalAddress:Port Scheduler Flags\n") {
		t.Fatalf("inline golden not rewritten as a block:\n%s", rewritten)
	}
	table, err := os.ReadFile(filepath.Join(dir, "golden-update.table"))
	if err != nil || !strings.Contains(string(table), "  -> 10.244.1.3:8080") {
		t.Fatalf("golden file: %v\n%s", err, table)
	}
}

func TestListAndShow(t *testing.T) {
	code, out, _ := runCLI("list")
	if code != exitPass || strings.Count(out, "\n") < 15 {
		t.Fatalf("list: %d\n%s", code, out)
	}
	code, out, _ = runCLI("show", "cooldown-v1.34")
	if code != exitPass || !strings.Contains(out, "name: cooldown-v1.34") {
		t.Fatalf("show: %d\n%s", code, out)
	}
}

func TestTraceIsJSONLines(t *testing.T) {
	code, out, _ := runCLI("trace", "cooldown-v1.34")
	if code != exitPass {
		t.Fatalf("code %d", code)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, `{"at":"`) {
			t.Fatalf("not a trace line: %s", l)
		}
	}
}

// mode: iptables replays from the CLI once the mode is linked in; a wrong
// route fails with exit code 1 and shows both sides.
func TestReplayIPTablesScenarios(t *testing.T) {
	files, _ := filepath.Glob("../../scenarios/testdata/iptables/*.yaml")
	if len(files) == 0 {
		t.Fatal("no iptables scenarios")
	}
	code, out, errs := runCLI(append([]string{"replay"}, files...)...)
	if code != exitPass || strings.Count(out, "PASS iptables-") != len(files) {
		t.Fatalf("code %d\n%s%s", code, out, errs)
	}
	code, out, _ = runCLI("replay", "../../scenarios/testdata/iptables/failing/wrong-route.yaml")
	if code != exitFail || !strings.Contains(out, "expected: {DROP: 1}") || !strings.Contains(out, "got:      {REJECT: 1}") {
		t.Fatalf("code %d, want %d\n%s", code, exitFail, out)
	}
}

// A budget of zero or less is a command-line mistake: exit 2, nothing run.
func TestNonPositiveBudgetsAreInvalid(t *testing.T) {
	for _, args := range [][]string{
		{"replay", "--max-events", "-1", "initial-sync-gating"},
		{"replay", "--max-events", "0", "initial-sync-gating"},
		{"trace", "--max-events", "-5", "initial-sync-gating"},
		{"replay", "--max-memory", "0", "initial-sync-gating"},
		{"trace", "--max-memory", "-1", "initial-sync-gating"},
	} {
		code, out, errs := runCLI(args...)
		if code != exitInvalid || out != "" {
			t.Errorf("%v: code %d, want %d; out %q", args, code, exitInvalid, out)
		}
		if !strings.Contains(errs, args[1]) {
			t.Errorf("%v: stderr does not name the flag: %q", args, errs)
		}
	}
}

// --update rewrites a stale inline `iptables:` golden and writes a missing
// `iptablesFile:`, and leaves a golden that is right alone: a second
// --update writes nothing at all.
func TestUpdateRewritesIPTablesGoldens(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("../../scenarios/testdata/golden-update-iptables.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file, table := filepath.Join(dir, "golden-update-iptables.yaml"), filepath.Join(dir, "golden-update-iptables.save")
	if err := os.WriteFile(file, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runCLI("replay", file); code != exitFail {
		t.Fatalf("stale goldens passed: %d\n%s%s", code, out, errs)
	}
	code, out, errs := runCLI("replay", "--update", file)
	if code != exitPass || !strings.Contains(out, "updated "+file) || !strings.Contains(out, "updated "+table) {
		t.Fatalf("--update: %d\n%s%s", code, out, errs)
	}
	if code, out, errs := runCLI("replay", file); code != exitPass {
		t.Fatalf("after --update: %d\n%s%s", code, out, errs)
	}
	rewritten, _ := os.ReadFile(file)
	// The stale block is now the tables at 1s, one endpoint, in the block's
	// indentation; the right one at 3s is as it was.
	oneEndpoint := "      iptables: |\n        *filter\n"
	if strings.Contains(string(rewritten), "stale golden") || !strings.Contains(string(rewritten), oneEndpoint) ||
		!strings.Contains(string(rewritten), "        -A KUBE-SVC-CDGGSHYLG3RE2FKL -m comment --comment \"default/web:http -> 10.244.1.2:8080\" -j KUBE-SEP-UIQK3OSOSTRHRPBX\n") {
		t.Fatalf("inline golden not rewritten:\n%s", rewritten)
	}
	at3 := string(src[strings.Index(string(src), "  - at: 3s"):])
	if !strings.HasSuffix(string(rewritten), at3) {
		t.Fatalf("the right golden at 3s changed:\n%s", rewritten)
	}
	saved, err := os.ReadFile(table)
	if err != nil || !strings.Contains(string(saved), "-j DNAT --to-destination 10.244.1.3:8080\n") || !strings.Contains(string(saved), ":KUBE-PROXY-CANARY - [0:0]\n") {
		t.Fatalf("golden file: %v\n%s", err, saved)
	}

	// Everything right: nothing is written, not even the same bytes.
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, f := range []string{file, table} {
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs = runCLI("replay", "--update", file)
	if code != exitPass || strings.Contains(out, "updated") {
		t.Fatalf("second --update: %d\n%s%s", code, out, errs)
	}
	for f, want := range map[string][]byte{file: rewritten, table: saved} {
		got, err := os.ReadFile(f)
		st, serr := os.Stat(f)
		if err != nil || serr != nil || string(got) != string(want) || !st.ModTime().Equal(old) {
			t.Errorf("%s was written by an --update with nothing to do (%v, %v)", f, err, serr)
		}
	}
}

// validate --objects prints a generated cluster's objects, and the loader
// reads them back as a dump: the same objects.
func TestValidatePrintsObjectsALoaderReadsBack(t *testing.T) {
	code, out, errs := runCLI("validate", "--objects", "generated-cluster-iptables")
	if code != exitPass {
		t.Fatalf("code %d\n%s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// 300 Services, a slice each (none has more than 100 endpoints), 10 Nodes.
	if len(lines) != 610 || !strings.Contains(out, `"name":"svc-00042"`) || !strings.Contains(out, `"clusterIP":"10.96.0.43"`) {
		t.Fatalf("%d lines:\n%.500s", len(lines), out)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cluster.json"), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	src := "name: dump\nproxy: {version: v1.34.0}\nobjects:\n  - file: cluster.json\ntimeline:\n  - {at: 1s, run: true}\n"
	if err := os.WriteFile(filepath.Join(dir, "dump.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, again, errs := runCLI("validate", "--objects", filepath.Join(dir, "dump.yaml"))
	if code != exitPass || again != out {
		t.Fatalf("code %d, the dump reads back differently\n%s", code, errs)
	}
}
