package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/proxysim/proxysim/scenarios/suite"
)

// The recipe's sample folder is what its README says: one scenario per
// mode, each passing on the fake dataplane (make ci-recipe runs the rest).
func TestCIRecipeSampleFolderPasses(t *testing.T) {
	code, out, errs := runCLI("replay", "--format", "json", "../../docs/ci/sample")
	var rep suite.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitPass {
		t.Fatalf("code %d, %v\n%s%s", code, err, out, errs)
	}
	var modes []string
	for _, s := range rep.Scenarios {
		modes = append(modes, s.Mode)
	}
	if slices.Sort(modes); strings.Join(modes, " ") != "iptables ipvs nftables" || rep.Passed != 3 {
		t.Errorf("sample: modes %v, %d passed", modes, rep.Passed)
	}
}

// The workflow is YAML that installs proxysim with go install and calls the
// script; the script is valid bash, and every variable it reads is in the
// recipe's README.
func TestCIRecipeFilesAgree(t *testing.T) {
	b, err := os.ReadFile("../../docs/ci/github-actions.yml")
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Jobs map[string]struct {
			Steps []struct {
				Run string `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatalf("github-actions.yml: %v", err)
	}
	var runs string
	for _, j := range wf.Jobs {
		for _, s := range j.Steps {
			runs += s.Run + "\n"
		}
	}
	for _, want := range []string{"CGO_ENABLED=0 go install github.com/proxysim/proxysim/cmd/proxysim@", "proxysim doctor", "proxysim-ci.sh"} {
		if !strings.Contains(runs, want) {
			t.Errorf("the workflow's steps lack %q", want)
		}
	}
	if bash, err := exec.LookPath("bash"); err == nil {
		if out, err := exec.Command(bash, "-n", "../../docs/ci/proxysim-ci.sh").CombinedOutput(); err != nil {
			t.Errorf("bash -n proxysim-ci.sh: %v\n%s", err, out)
		}
	}
	script, err := os.ReadFile("../../docs/ci/proxysim-ci.sh")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../docs/ci/README.md")
	if err != nil {
		t.Fatal(err)
	}
	vars := regexp.MustCompile(`PROXYSIM(_[A-Z_]+)?\b`).FindAllString(string(script), -1)
	if len(vars) < 8 {
		t.Fatalf("found %d variables in the script", len(vars))
	}
	for _, v := range vars {
		if !strings.Contains(string(readme), "`"+v+"`") && !strings.Contains(string(readme), v+"`") {
			t.Errorf("the script reads %s, which docs/ci/README.md does not document", v)
		}
	}
	if strings.Contains(string(script), "netns/") || strings.Contains(string(script), "make ") || strings.Contains(string(script), "go run") {
		t.Errorf("the script uses files of proxysim's repository; it must run from a go-installed proxysim")
	}
}
