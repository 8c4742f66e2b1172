package ipvsmode_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/scenarios/internal/scenariotest"
	"github.com/proxysim/proxysim/scenarios/ipvsmode"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim/ipvs"
)

// The library's IPVS packet-path scenarios pass with their routes.
func TestIPVSRouteScenariosPass(t *testing.T) {
	var files []string
	all, _ := filepath.Glob("../library/ipvs-*.yaml")
	for _, f := range all {
		if b, _ := os.ReadFile(f); strings.Contains(string(b), "packetPath: true") {
			files = append(files, f)
		}
	}
	if len(files) < 4 {
		t.Fatalf("only %d IPVS route scenarios", len(files))
	}
	scenariotest.Passes(t, files)
}

// Their failing twins fail exactly at their "# want-fail: LINE WHAT at
// INSTANT" lines: routes another mode gives, or a broken feature would.
func TestIPVSFailingRoutesFailWhereDeclared(t *testing.T) {
	files, _ := filepath.Glob("../testdata/ipvs/failing/*.yaml")
	if len(files) < 2 {
		t.Fatalf("only %d failing IPVS scenarios", len(files))
	}
	scenariotest.FailsWhereDeclared(t, files)
}

// clusterCIDR must be an IPv4 CIDR.
func TestPacketPathSettingsAreChecked(t *testing.T) {
	_, err := parse(t, "name: x\nproxy: {version: v1.36.0, packetPath: true, clusterCIDR: nope}\ntimeline: [{at: 0s, note: n}]\n")
	if err == nil || !strings.Contains(err.Error(), `"nope" is not an IPv4 CIDR`) {
		t.Fatalf("got %v", err)
	}
}

// masqueraded names outcomes of the shares, each at most its share, and
// needs a tracer that tells masquerade; again is refused.
func TestRouteMasqueradedIsChecked(t *testing.T) {
	head := "name: x\nproxy: {version: v1.36.0, packetPath: true}\ntimeline:\n- at: 1s\n  expect:\n    route: "
	for _, tc := range []struct{ route, want string }{
		{"{from: 10.0.0.1, to: 10.96.0.10:80, shares: {10.244.1.2:80: 1}, masqueraded: {10.244.1.3:80: 1}}", `"10.244.1.3:80" is not one of the shares' outcomes`},
		{"{from: 10.0.0.1, to: 10.96.0.10:80, shares: {10.244.1.2:80: 1/2, REJECT: 1/2}, masqueraded: {10.244.1.2:80: 1}}", "want a share in (0, 1/2]"},
		{"{from: 10.0.0.1, to: 10.96.0.10:80, again: 1s, shares: {\"A:1 -> A:1\": 1}}", "one connection only"},
	} {
		_, err := parse(t, head+tc.route+"\n")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.route, err, tc.want)
		}
	}
}

// packetPath on a dataplane without ipsets and iptables (a kernel's IPVS
// alone) is refused when the replay opens it, and the dataplane closed.
func TestPacketPathNeedsRulesOnTheDataplane(t *testing.T) {
	s, err := parse(t, "name: x\nproxy: {version: v1.36.0, packetPath: true}\ntimeline: [{at: 1s, note: n}]\n")
	if err != nil {
		t.Fatal(err)
	}
	closed := 0
	factory := ipvsmode.OnKernel(func() (ipvs.Dataplane, func() error, error) {
		dp, _, _, _ := fakes.Dataplane("6.1.0", nil)
		return dp, func() error { closed++; return nil }, nil
	})
	_, err = replay.Replay(s, replay.Options{Dataplane: factory})
	if err == nil || !strings.Contains(err.Error(), "writes no ipsets and iptables rules") || closed != 1 {
		t.Fatalf("got %v, closed %d", err, closed)
	}
}
