package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const stories = "../../scenarios/migrate/stories/"

// migrate's exit codes: 1 for differences, 0 unchanged, 5 nodes not
// ready, 2 bad input naming the file and field.
func TestMigrateExitCodes(t *testing.T) {
	for _, tc := range []struct {
		story, to string
		code      int
		want      string
	}{
		{"nodeport-localhost", "nftables", 1, "default/web (NodePort): 1 difference"},
		{"headless", "nftables", 0, "default/db (Headless): unchanged"},
		{"kernel-too-old", "nftables", 5, "FAIL node-old: kernel 5.10.0-33-amd64 is older than 5.13.0"},
	} {
		code, out, errs := runCLI("migrate", "--cluster", stories+tc.story+"/cluster.yaml", "--config", stories+tc.story+"/kube-proxy.yaml", "--to", tc.to)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s: code %d, want %d and %q\n%s%s", tc.story, code, tc.code, tc.want, out, errs)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--to", "userspace"}, `--to "userspace": want iptables, ipvs, nftables`},
		{[]string{"--to", "nftables", "--set", "minSyncPeriod=1s"}, "want proxy.FIELD=VALUE"},
		{[]string{"--to", "nftables", "--set", "proxy.nodePortAddresses=all"}, "--set proxy.nodePortAddresses"},
		{[]string{"--to", "nftables", "--node", "node-z"}, "--node node-z: no such Node"},
		{[]string{"--to", "nftables", "--format", "xml"}, `--format "xml"`},
		{[]string{"--to", "nftables", "--dataplane", "qemu"}, `--dataplane "qemu"`},
	} {
		args := append([]string{"migrate", "--cluster", stories + "headless/cluster.yaml", "--config", stories + "headless/kube-proxy.yaml"}, tc.args...)
		code, out, errs := runCLI(args...)
		if code != exitInvalid || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: code %d, want 2 and %q\n%s%s", tc.args, code, tc.want, out, errs)
		}
	}
}

// A bad dump is refused with its file, line and field.
func TestMigrateNamesTheBadField(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(stories + "headless/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(src), "    port: 5432\n", "    port: many\n", 1)
	cluster := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(cluster, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI("migrate", "--cluster", cluster, "--config", stories+"headless/kube-proxy.yaml", "--to", "nftables")
	if code != exitInvalid || !strings.Contains(errs, cluster+":") || !strings.Contains(errs, "port") {
		t.Fatalf("code %d\n%s%s", code, out, errs)
	}
}

// --set changes the target: with node ports on every address again, only
// localhost differs; --format json and --html write the same report.
func TestMigrateSetJSONAndHTML(t *testing.T) {
	html := filepath.Join(t.TempDir(), "m.html")
	base := []string{"migrate", "--cluster", stories + "nodeport-second-address/cluster.yaml", "--config", stories + "nodeport-second-address/kube-proxy.yaml", "--to", "nftables"}
	code, out, _ := runCLI(append(base, "--format", "json", "--html", html)...)
	var r struct {
		Exit     int `json:"exitCode"`
		Services []struct {
			Differences []struct {
				Rule struct{ ID string } `json:"rule"`
			} `json:"differences"`
		} `json:"services"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 1 || r.Exit != 1 || len(r.Services[0].Differences) != 5 {
		t.Fatalf("code %d, %v: %+v\n%s", code, err, r, out)
	}
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	p := string(page)
	for _, want := range []string{"<!DOCTYPE html>", "nodeport-addresses", "default/web", "Not compared"} {
		if !strings.Contains(p, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, fetch := range []string{"http://", "https://", "<script src", "<link", "url("} {
		if strings.Contains(p, fetch) {
			t.Errorf("the page fetches something: %q", fetch)
		}
	}
	code, out, errs := runCLI(append(base, "--set", `proxy.nodePortAddresses=""`)...)
	if code != 1 || !strings.Contains(out, "default/web (NodePort): 1 difference") || strings.Contains(out, "nodeport-addresses") {
		t.Fatalf("code %d\n%s%s", code, out, errs)
	}
}
