package main

import (
	"strings"
	"testing"

	"github.com/proxysim/proxysim/netns"
)

// An unknown iptables backend is bad input: exit 2, nothing run.
func TestUnknownIPTablesBackendIsRefused(t *testing.T) {
	defer func(b string) { netnsIPTables = b }(netnsIPTables)
	code, out, errs := runCLI("replay", "--dataplane", "netns", "--iptables", "iptables-nft", "../../scenarios/testdata/iptables/clusterip-spread.yaml")
	if code != exitInvalid || !strings.Contains(errs, `unknown iptables backend "iptables-nft" (available: nft, legacy)`) || out != "" {
		t.Fatalf("code %d\n%s%s", code, out, errs)
	}
}

// --iptables picks the backend a netns replay of an iptables scenario
// programs (root and the tools; see make e2e-host).
func TestNetnsReplayUsesTheChosenIPTablesBackend(t *testing.T) {
	defer func(b string) { netnsIPTables = b }(netnsIPTables)
	if !netns.Privileged() {
		t.Skip("needs root")
	}
	for _, b := range []struct{ flag, env string }{{"nft", "(nf_tables)"}, {"legacy", "(legacy)"}} {
		if _, err := netns.LookIPTables(netns.IPTablesBackend(b.flag)); err != nil {
			t.Skip(err)
		}
		code, out, errs := runCLI("replay", "--dataplane", "netns", "--iptables", b.flag, "../../scenarios/testdata/iptables/clusterip-spread.yaml")
		if code != exitPass || !strings.Contains(out, "PASS iptables-clusterip-spread") || !strings.Contains(out, b.env+" dataplane") {
			t.Fatalf("%s: code %d\n%s%s", b.flag, code, out, errs)
		}
	}
}
