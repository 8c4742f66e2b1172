package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --metrics writes kube-proxy's metrics in the text format, the same bytes
// on every run (virtual timestamps, sorted series); --metrics-at takes
// them earlier in the replay.
func TestReplayWritesDeterministicMetrics(t *testing.T) {
	dir := t.TempDir()
	var first []byte
	for i := range 3 {
		file := filepath.Join(dir, "m.txt")
		code, out, errs := runCLI("replay", "--metrics", file, "nftables-partial-and-full-syncs")
		if code != exitPass {
			t.Fatalf("code %d\n%s%s", code, out, errs)
		}
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = got
			continue
		}
		if !bytes.Equal(got, first) {
			t.Fatalf("run %d differs from the first", i+1)
		}
	}
	for _, want := range []string{
		"# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram\n",
		`kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 14` + "\n",
		`kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"} 3` + "\n",
		// the last sync, the restarted proxier's at 1h0m20s after 2026-01-01
		`kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1.76722922e+09` + "\n",
	} {
		if !bytes.Contains(first, []byte(want)) {
			t.Errorf("metrics lack %q:\n%s", want, first)
		}
	}
	if bytes.Contains(first, []byte("iptables")) {
		t.Errorf("nftables mode exposes iptables metrics")
	}

	at := filepath.Join(dir, "at.txt")
	if code, out, errs := runCLI("replay", "--metrics", at, "--metrics-at", "7s", "nftables-partial-and-full-syncs"); code != exitPass {
		t.Fatalf("code %d\n%s%s", code, out, errs)
	}
	got, _ := os.ReadFile(at)
	if want := `kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 11` + "\n"; !strings.Contains(string(got), want) {
		t.Errorf("metrics at 7s lack %q:\n%s", want, got)
	}
}

func TestMetricsFlagMistakesAreInvalid(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"replay", "--metrics-at", "1s", "initial-sync-gating"},
		{"replay", "--metrics", filepath.Join(dir, "x"), "--metrics-at", "-1s", "initial-sync-gating"},
		{"replay", "--metrics", filepath.Join(dir, "x"), "initial-sync-gating", "sync-cost-v1.34"},
		{"replay", "--metrics", filepath.Join(dir, "x"), "--metrics-at", "2h", "sync-cost-v1.34"},
	} {
		code, out, errs := runCLI(args...)
		if code != exitInvalid || out != "" {
			t.Errorf("%v: code %d, want %d; out %q; err %q", args, code, exitInvalid, out, errs)
		}
	}
}
