package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/netns/vm"
	"github.com/proxysim/proxysim/scenarios/suite"
)

// userFolder lays out a user's scenario folder: a passing scenario with its
// manifest, a failing one (two expectations) in a subfolder, and YAML that is
// not a scenario.
func userFolder(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	copyFile(t, "../../scenarios/library/cooldown-v1.34.yaml", filepath.Join(dir, "a-cooldown.yaml"))
	copyFile(t, "../../scenarios/library/manifests/web.yaml", filepath.Join(dir, "manifests", "web.yaml"))
	copyFile(t, "../../scenarios/testdata/failing/wrong-expectations.yaml", filepath.Join(dir, "team", "wrong.yaml"))
	if err := os.WriteFile(filepath.Join(dir, "team", "values.yaml"), []byte("replicas: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReplayFolderWritesJUnitThatParsesBack(t *testing.T) {
	dir := userFolder(t)
	junit := filepath.Join(t.TempDir(), "out.xml")
	code, out, errs := runCLI("replay", dir, "--junit", junit)
	if code != exitFail {
		t.Fatalf("code %d, want %d\n%s%s", code, exitFail, out, errs)
	}
	// The text report still goes to stdout, in path order.
	if a, b := strings.Index(out, "PASS cooldown-v1.34"), strings.Index(out, "FAIL wrong-expectations"); a < 0 || b < a {
		t.Errorf("text report:\n%s", out)
	}
	if !strings.Contains(errs, filepath.Join(dir, "team", "values.yaml")+": skipped: no top-level proxy or timeline key") {
		t.Errorf("stderr does not name the skipped file:\n%s", errs)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Cases []struct {
				Name     string `xml:"name,attr"`
				File     string `xml:"file,attr"`
				Failures []struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if doc.Tests != 2 || doc.Failures != 1 || len(doc.Suites) != 1 || len(doc.Suites[0].Cases) != 2 {
		t.Fatalf("JUnit: %+v\n%s", doc, b)
	}
	c := doc.Suites[0].Cases
	if c[0].Name != "cooldown-v1.34" || len(c[0].Failures) != 0 || c[1].Name != "wrong-expectations" || len(c[1].Failures) != 2 {
		t.Fatalf("cases: %+v", c)
	}
	wrong := filepath.Join(dir, "team", "wrong.yaml")
	for i, line := range []string{":11:", ":12:"} {
		if m := c[1].Failures[i].Message; !strings.HasPrefix(m, wrong+line) {
			t.Errorf("failure %d: %q, want it to start with %s%s", i, m, wrong, line)
		}
	}
}

func TestReplayFormatJSONIsOneStableDocument(t *testing.T) {
	dir := userFolder(t)
	code, out, errs := runCLI("replay", "--format", "json", dir, "initial-sync-gating")
	if code != exitFail {
		t.Fatalf("code %d\n%s%s", code, out, errs)
	}
	var rep suite.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, out)
	}
	if rep.Format != suite.Format || rep.Dataplane != "fake" || rep.Passed != 2 || rep.Failed != 1 || len(rep.Scenarios) != 3 {
		t.Fatalf("report: %+v", rep)
	}
	names := []string{rep.Scenarios[0].Name, rep.Scenarios[1].Name, rep.Scenarios[2].Name}
	if strings.Join(names, " ") != "cooldown-v1.34 wrong-expectations initial-sync-gating" {
		t.Errorf("order: %v", names)
	}
	w := rep.Scenarios[1]
	if w.Passed || w.Syncs == 0 || w.VirtualTime != "2s" || len(w.Failures) != 2 || w.Failures[0].Line != 11 || w.Failures[1].Line != 12 {
		t.Errorf("failing scenario: %+v", w)
	}
	if _, again, _ := runCLI("replay", "--format", "json", dir, "initial-sync-gating"); again != out {
		t.Errorf("a second run differs:\n%s\n%s", out, again)
	}
}

func TestReplayFolderRefusals(t *testing.T) {
	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, "values.yaml"), []byte("a: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", empty}, empty + ": no scenarios found"},
		{[]string{"replay", "--format", "xml", "initial-sync-gating"}, `--format "xml": want text or json`},
		// One broken scenario in a folder runs nothing.
		{[]string{"replay", "../../scenarios/testdata/invalid"}, "05-missing-version.yaml"},
	} {
		code, out, errs := runCLI(c.args...)
		if code != exitInvalid || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%v: code %d, stderr %q, want exit 2 and %q\n%s", c.args, code, errs, c.want, out)
		}
	}
	// An unwritable --junit is exit 3, after the replays ran.
	code, _, errs := runCLI("replay", "initial-sync-gating", "--junit", filepath.Join(empty, "no", "such", "dir.xml"))
	if code != exitCannotRun || !strings.Contains(errs, "--junit") {
		t.Errorf("unwritable --junit: code %d, %s", code, errs)
	}
}

// The replay inside the VM sends its report as one marked console line; the
// host keeps it out of the text it passes on, and names the user's files.
func TestVMReportLineComesBackUnderTheHostNames(t *testing.T) {
	dir := userFolder(t)
	var files vm.Files
	guest, err := files.AddFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Outside a VM the guest path does not exist: replay the host folder
	// and rename its paths to the guest's, as the replay inside would print.
	var guestOut bytes.Buffer
	if code := run([]string{"replay", "--vm-result", dir}, &guestOut, io.Discard); code != exitFail {
		t.Fatalf("code %d", code)
	}
	text := strings.ReplaceAll(guestOut.String(), dir, guest)
	var passed bytes.Buffer
	console := &vmConsole{w: &passed}
	for _, chunk := range splitEvery(text, 7) { // the console arrives in pieces
		console.Write([]byte(chunk))
	}
	if console.report == nil || console.err != nil {
		t.Fatalf("no report: %v\n%s", console.err, text)
	}
	if strings.Contains(passed.String(), vmResultMarker) || !strings.Contains(passed.String(), "FAIL wrong-expectations") {
		t.Errorf("passed-through console:\n%s", passed.String())
	}
	hostFiles(console.report, &files)
	s := console.report.Scenarios
	if len(s) != 2 || s[1].Failures[0].File != filepath.Join(dir, "team", "wrong.yaml") || !strings.HasPrefix(s[1].Failures[0].Message, filepath.Join(dir, "team", "wrong.yaml")+":11:") || s[0].Wall <= 0 {
		t.Errorf("report under host names: %+v", s)
	}
}

func splitEvery(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// --mode keeps the scenarios of the modes named (a CI stage per dataplane);
// a stage left with none passes with an empty report, saying so.
func TestReplayModeFilter(t *testing.T) {
	dir := userFolder(t)
	copyFile(t, "../../scenarios/library/churn-nftables.yaml", filepath.Join(dir, "n", "churn-nftables.yaml"))
	code, out, errs := runCLI("replay", "--format", "json", "--mode", "nftables,iptables", dir)
	var rep suite.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitPass || len(rep.Scenarios) != 1 || rep.Scenarios[0].Name != "churn-nftables" {
		t.Fatalf("code %d, %v: %+v\n%s", code, err, rep, errs)
	}
	if !strings.Contains(errs, filepath.Join(dir, "a-cooldown.yaml")+": left out: mode ipvs") {
		t.Errorf("stderr does not name what was left out:\n%s", errs)
	}
	junit := filepath.Join(t.TempDir(), "none.xml")
	code, out, errs = runCLI("replay", "--mode", "iptables", "--junit", junit, dir)
	if code != exitPass || out != "" || !strings.Contains(errs, "no scenario of mode iptables to replay") {
		t.Errorf("no iptables scenario: code %d\n%s%s", code, out, errs)
	}
	if b, err := os.ReadFile(junit); err != nil || !strings.Contains(string(b), `tests="0"`) {
		t.Errorf("empty JUnit: %v\n%s", err, b)
	}
	code, _, errs = runCLI("replay", "--mode", "ebpf", dir)
	if code != exitInvalid || !strings.Contains(errs, "--mode ebpf: unknown mode") {
		t.Errorf("--mode ebpf: code %d, %s", code, errs)
	}
}

// validate takes a folder as replay does: the same files, nothing run.
func TestValidateFolder(t *testing.T) {
	code, out, errs := runCLI("validate", "../../docs/ci/sample")
	if code != exitPass || strings.Count(out, "\nok ") != 2 || !strings.HasPrefix(out, "ok sample-web-iptables") {
		t.Errorf("code %d\n%s%s", code, out, errs)
	}
}
