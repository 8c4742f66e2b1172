package ipvsmode_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/ipvsmode"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/route"
	"github.com/proxysim/proxysim/sim/vclock"
)

// pathKernel stands in for netns.IPVSPathNode: its "kernel" is a second
// set of fakes, and it records what it was asked to measure.
type pathKernel struct {
	dp       ipvs.Dataplane
	sets     *fakes.IPSets
	rules    *fakes.IPTables
	verifies int
	checked  []string
	disagree func(route.Packet) error
}

func newPathKernel() *pathKernel {
	dp, _, _, _ := fakes.Dataplane("6.1.0", vclock.New(vclock.Epoch))
	k := &pathKernel{sets: fakes.NewIPSets(), rules: fakes.NewIPTables()}
	dp.IPSets, dp.IPTables = k.sets, k.rules
	k.dp = dp
	return k
}

func (k *pathKernel) Programmed() ipvs.Dataplane { return k.dp }
func (k *pathKernel) Close() error               { return nil }
func (k *pathKernel) Verify(wantSets, wantRules string) error {
	k.verifies++
	got, err := ipvs.SaveIPSets(k.sets)
	if err != nil {
		return err
	}
	if got != wantSets || k.rules.SaveAll() != wantRules {
		return errors.New("the kernel holds other ipsets or rules")
	}
	return nil
}
func (k *pathKernel) CheckRoute(pkt route.Packet, predicted, masq route.Shares) error {
	k.checked = append(k.checked, fmt.Sprintf("%s -> %s:%d %s masq %s", pkt.Src, pkt.Dst, pkt.DPort, predicted, masq))
	if k.disagree != nil {
		return k.disagree(pkt)
	}
	return nil
}

func replayOnPathKernel(t *testing.T, name string, k *pathKernel) *replay.Result {
	t.Helper()
	s, err := scenarios.LoadLibrary(name)
	if err != nil {
		t.Fatal(err)
	}
	res, err := replay.Replay(s, replay.Options{Dataplane: ipvsmode.OnKernelPacketPath(func([]string) (ipvsmode.PathKernel, error) { return k, nil })})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Every route is measured on the kernel with the tracer's shares and
// masqueraded parts, after one look at the kernel's sets and rules (nothing
// was written between the routes).
func TestPacketPathOnKernelMeasuresEveryRoute(t *testing.T) {
	k := newPathKernel()
	res := replayOnPathKernel(t, "ipvs-clusterip-and-nodeport", k)
	if !res.Passed() {
		var b strings.Builder
		replay.Report(&b, res, true)
		t.Fatal(b.String())
	}
	if len(k.checked) != 7 || k.verifies != 1 {
		t.Fatalf("%d routes measured after %d looks at the kernel, want 7 after 1:\n%s", len(k.checked), k.verifies, strings.Join(k.checked, "\n"))
	}
	want := "10.244.1.2 -> 10.96.0.10:80 {10.244.1.2:8080: 1/3, 10.244.2.3:8080: 1/3, 10.244.3.4:8080: 1/3} masq {10.244.1.2:8080: 1/3}"
	if k.checked[1] != want {
		t.Errorf("the hairpin route measured as %q, want %q", k.checked[1], want)
	}
}

// A kernel that disagrees fails the route it disagrees on, and one whose
// sets differ from what was written fails before anything is measured.
func TestPacketPathOnKernelFailsWhenTheKernelDisagrees(t *testing.T) {
	k := newPathKernel()
	k.disagree = func(pkt route.Packet) error {
		if pkt.DPort == 81 {
			return errors.New("TIMEOUT ×16")
		}
		return nil
	}
	res := replayOnPathKernel(t, "ipvs-clusterip-and-nodeport", k)
	var b strings.Builder
	replay.Report(&b, res, false)
	if len(res.Failures) != 1 || !strings.Contains(b.String(), "the kernel disagrees: TIMEOUT ×16") {
		t.Fatalf("want one failure, the kernel disagreeing on port 81:\n%s", b.String())
	}

	k = newPathKernel()
	k.disagree = nil
	orig := k.dp.IPSets
	k.dp.IPSets = droppingSets{orig, "KUBE-LOOP-BACK"}
	res = replayOnPathKernel(t, "ipvs-clusterip-and-nodeport", k)
	if res.Passed() || len(k.checked) != 0 {
		t.Fatalf("a kernel without the KUBE-LOOP-BACK entries passed, or was measured %d times", len(k.checked))
	}
}

// droppingSets loses the entries added to one set, as a kernel that took
// the command and kept nothing would.
type droppingSets struct {
	ipvs.IPSetHandle
	lose string
}

func (d droppingSets) AddEntry(set, entry string) error {
	if set == d.lose {
		return nil
	}
	return d.IPSetHandle.AddEntry(set, entry)
}

// A scenario without packetPath has no packet path to measure.
func TestPacketPathOnKernelNeedsPacketPath(t *testing.T) {
	s, err := scenarios.Parse("x.yaml", []byte("name: x\nproxy: {version: v1.36.0}\ntimeline:\n- at: 1s\n  expect: {syncs: {at: [0s]}}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = replay.Replay(s, replay.Options{Dataplane: ipvsmode.OnKernelPacketPath(func([]string) (ipvsmode.PathKernel, error) { return newPathKernel(), nil })})
	if err == nil || !strings.Contains(err.Error(), "packetPath") {
		t.Fatalf("got %v, want an error naming packetPath", err)
	}
}

// WithPacketPath sends a packetPath scenario without client steps to the
// packet path's kernel, and the rest (the affinity story's connect steps
// included) to the other dataplane.
func TestWithPacketPathDispatches(t *testing.T) {
	errOther := errors.New("the other dataplane")
	opened := 0
	f := ipvsmode.WithPacketPath(func(*scenarios.Scenario, clock.PassiveClock) (scenarios.Dataplane, error) { return nil, errOther },
		func([]string) (ipvsmode.PathKernel, error) { opened++; return newPathKernel(), nil })
	for name, path := range map[string]bool{"ipvs-external-traffic-policy-local": true, "ipvs-session-affinity-route": false, "graceful-termination": false} {
		s, err := scenarios.LoadLibrary(name)
		if err != nil {
			t.Fatal(err)
		}
		before := opened
		_, err = replay.Replay(s, replay.Options{Dataplane: f})
		if got := opened > before; got != path || (!path && !errors.Is(err, errOther)) {
			t.Errorf("%s: packet path opened %v (want %v), err %v", name, got, path, err)
		}
	}
}
