package iptablesmode_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/internal/scenariotest"
	_ "github.com/proxysim/proxysim/scenarios/iptablesmode"
)

const testdata = "../testdata/iptables"

// Every iptables scenario replays green: its iptables-save goldens and its
// routes hold.
func TestIPTablesScenariosPass(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testdata, "*.yaml"))
	if len(files) < 3 {
		t.Fatalf("only %d iptables scenarios", len(files))
	}
	scenariotest.Passes(t, files)
}

// Every scenario under failing/ fails exactly at its "# want-fail: LINE
// WHAT at INSTANT" lines, and nowhere else.
func TestIPTablesFailingScenariosFailWhereDeclared(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testdata, "failing", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no failing iptables scenarios")
	}
	scenariotest.FailsWhereDeclared(t, files)
}

// A wrong route says what was expected and what the tracer found, with
// exact shares.
func TestAWrongRouteShowsBothSides(t *testing.T) {
	res := scenariotest.Replay(t, filepath.Join(testdata, "failing", "wrong-route.yaml"))
	if len(res.Failures) != 2 {
		t.Fatalf("want 2 failures, got %v", res.Failures)
	}
	f := res.Failures[0]
	if f.Expected != "{10.244.1.2:8080: 1/2, 10.244.2.3:8080: 1/4, 10.244.3.4:8080: 1/4}" ||
		f.Got != "{10.244.1.2:8080: 0.333333333300, 10.244.2.3:8080: 0.333333333350, 10.244.3.4:8080: 0.333333333350}" {
		t.Errorf("expected %q, got %q", f.Expected, f.Got)
	}
}

func parse(text string) error {
	_, err := scenarios.Parse("x.yaml", []byte(text), nil)
	return err
}

const header = "name: x\nproxy: {mode: iptables, version: v1.36.0}\n"

// mode: iptables is accepted once the mode is registered, and its keys are
// checked at load time.
func TestIPTablesModeLoadsAndChecksItsKeys(t *testing.T) {
	if err := parse(header + "timeline: [{at: 0s, note: n}]\n"); err != nil {
		t.Fatalf("mode iptables rejected: %v", err)
	}
	for _, c := range []struct{ text, want string }{
		{"proxy: {mode: iptables, version: v1.36.0, clusterCIDR: nope}\ntimeline: [{at: 0s, note: n}]\n", `"nope" is not a CIDR`},
		{"proxy: {mode: iptables, version: v1.36.0, nodeIPs: [x]}\ntimeline: [{at: 0s, note: n}]\n", `"x" is not an IP address`},
		{header[len("name: x\n"):] + "timeline: [{at: 0s, fault: {restoreFailures: 0}}]\n", "want at least 1 failing restore"},
		{header[len("name: x\n"):] + "timeline: [{at: 0s, expect: {route: {from: 10.0.0.1, to: 10.96.0.1:80, shares: {DROP: 1/2}}}}]\n", "shares sum to 1/2, not 1"},
		{header[len("name: x\n"):] + "timeline: [{at: 0s, expect: {route: {from: 10.0.0.1, to: 10.96.0.1, shares: {DROP: 1}}}}]\n", "want ip:port"},
		{header[len("name: x\n"):] + "timeline: [{at: 0s, expect: {route: {from: 10.0.0.1, to: 10.96.0.1:80, protocol: ICMP, shares: {DROP: 1}}}}]\n", "want TCP, UDP or SCTP"},
		{header[len("name: x\n"):] + "timeline: [{at: 0s, expect: {route: {from: 10.0.0.1, to: 10.96.0.1:80, shares: {nowhere: 1}}}}]\n", "want an endpoint ip:port or DROP"},
		{header[len("name: x\n"):] + "timeline: [{at: 0s, expect: {ipvs: x}}]\n", "ipvs"},
		{header[len("name: x\n"):] + "timeline: [{at: 0s, expect: {route: {from: 10.0.0.1, to: 10.96.0.1:80, shares: {DROP: 1}, masqueraded: {}}}}]\n", "this mode's tracer does not tell masquerade"},
	} {
		err := parse("name: x\n" + c.text)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.text, err, c.want)
		}
	}
}
