package suite_test

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/scenarios"
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/scenarios/suite"
)

func write(t *testing.T, dir, rel, content string) string {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const scenario = "name: %s\nproxy: {version: v1.34.0}\ntimeline: [{at: 1s}]\n"

func TestFindTakesScenariosInPathOrderAndSkipsWhatTheyName(t *testing.T) {
	dir := t.TempDir()
	want := []string{
		write(t, dir, "a.yaml", scenario),
		write(t, dir, "b/c.yml", "# a comment first\n---\ntimeline: []\n"),
		write(t, dir, "b/d.yaml", "\"proxy\": {version: v1.34.0}\n"),
		write(t, dir, "z.yaml", scenario),
	}
	write(t, dir, "manifests/web.yaml", scenario) // named by scenarios, never replayed
	write(t, dir, "golden/x.yaml", scenario)
	write(t, dir, "b/goldens/x.yaml", scenario)
	write(t, dir, ".github/workflows/ci.yaml", "on: push\njobs: {}\n")
	write(t, dir, "notes.txt", scenario)
	kp := write(t, dir, "kube-proxy.yaml", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\n")
	dump := write(t, dir, "dump.yaml", "kind: List\nitems:\n- proxy: x\n")
	other := write(t, dir, "values.yaml", "replicas: 3\n")
	got, err := suite.Find(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Files, want) {
		t.Errorf("files:\n%v\nwant\n%v", got.Files, want)
	}
	var skipped []string
	for _, s := range got.Skipped {
		skipped = append(skipped, s.File)
	}
	if w := []string{dump, kp, other}; !slices.Equal(skipped, w) {
		t.Errorf("skipped %v, want %v", got.Skipped, w)
	}
	// Roots in the order given, each file once; a file root as it is.
	got, err = suite.Find(want[3], dir, filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	if w := append([]string{want[3]}, want[:3]...); !slices.Equal(got.Files, w) {
		t.Errorf("files:\n%v\nwant\n%v", got.Files, w)
	}
	if _, err := suite.Find(filepath.Join(dir, "none")); err == nil {
		t.Error("a missing root gave no error")
	}
}

// Two real replays, one passing and one failing twice, give a JUnit report
// that encoding/xml reads back with a case per scenario and a failure per
// failed expectation, at its file:line, and a JSON report with the same.
func TestReportsOfRealReplays(t *testing.T) {
	rep := &suite.Report{Dataplane: "fake"}
	for _, f := range []string{"../library/cooldown-v1.34.yaml", "../testdata/failing/wrong-expectations.yaml"} {
		s, err := scenarios.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		res, err := replay.Replay(s, replay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rep.Add(suite.FromReplay(res))
	}
	s, err := scenarios.Load("../library/cooldown-v1.34.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rep.Add(suite.FromError(s, os.ErrPermission))
	if rep.Passed != 1 || rep.Failed != 1 || rep.Errors != 1 {
		t.Fatalf("counts: %+v", rep)
	}

	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Tests int    `xml:"tests,attr"`
			Cases []struct {
				Name      string `xml:"name,attr"`
				Classname string `xml:"classname,attr"`
				File      string `xml:"file,attr"`
				Failures  []struct {
					Message string `xml:"message,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
				Error *struct {
					Message string `xml:"message,attr"`
				} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	out := rep.JUnit()
	if err := xml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("JUnit does not parse: %v\n%s", err, out)
	}
	if doc.Tests != 3 || doc.Failures != 1 || doc.Errors != 1 || len(doc.Suites) != 1 || len(doc.Suites[0].Cases) != 3 {
		t.Fatalf("JUnit counts: %+v\n%s", doc, out)
	}
	cases := doc.Suites[0].Cases
	if cases[0].Name != "cooldown-v1.34" || len(cases[0].Failures) != 0 || cases[0].Error != nil || cases[0].Classname != "proxysim.ipvs" {
		t.Errorf("passing case: %+v", cases[0])
	}
	fails := cases[1].Failures
	if cases[1].Name != "wrong-expectations" || len(fails) != 2 {
		t.Fatalf("failing case: %+v", cases[1])
	}
	for i, want := range []string{"wrong-expectations.yaml:11:", "wrong-expectations.yaml:12:"} {
		if !strings.Contains(fails[i].Message, want) || !strings.HasPrefix(fails[i].Message, "../testdata/failing/") {
			t.Errorf("failure %d: message %q lacks %q", i, fails[i].Message, want)
		}
	}
	if !strings.Contains(fails[1].Text, "- TCP  10.96.0.10:80 wrr") || !strings.Contains(fails[0].Text, "trace leading to it:") {
		t.Errorf("failure details:\n%s\n%s", fails[0].Text, fails[1].Text)
	}
	if cases[2].Error == nil || !strings.Contains(cases[2].Error.Message, "permission denied") {
		t.Errorf("error case: %+v", cases[2])
	}

	var back suite.Report
	if err := json.Unmarshal(rep.JSON(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Format != suite.Format || len(back.Scenarios) != 3 {
		t.Fatalf("JSON: %+v", back)
	}
	ok, bad := back.Scenarios[0], back.Scenarios[1]
	if !ok.Passed || ok.Syncs == 0 || ok.VirtualTime == "" || ok.VirtualSeconds <= 0 || len(ok.Failures) != 0 {
		t.Errorf("passing scenario in JSON: %+v", ok)
	}
	if bad.Passed || len(bad.Failures) != 2 || bad.Failures[0].Line != 11 || bad.Failures[0].Field == "" || !strings.Contains(bad.Failures[0].Message, ":11:") {
		t.Errorf("failing scenario in JSON: %+v", bad)
	}
	// Nothing from the wall clock: the same replays give the same bytes.
	again := &suite.Report{Dataplane: "fake"}
	for _, r := range back.Scenarios {
		r.Wall = 12345
		again.Add(r)
	}
	if a, b := string(again.JSON()), string(rep.JSON()); a != b {
		t.Errorf("JSON depends on wall time:\n%s\n%s", a, b)
	}
}
