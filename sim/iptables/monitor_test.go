package iptables_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim/iptables"
	"github.com/proxysim/proxysim/sim/vclock"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// watched is a monitor over a fake on a virtual clock, recording when it
// reloaded and what it noted.
type watched struct {
	clk     *vclock.Clock
	ipt     *fakes.IPTables
	m       *iptables.Monitor
	reloads []time.Duration
	notes   []string
}

func watch(t *testing.T, dp iptables.Dataplane, ipt *fakes.IPTables) *watched {
	t.Helper()
	w := &watched{clk: vclock.New(t0), ipt: ipt}
	if dp == nil {
		dp = ipt
	}
	w.m = iptables.StartMonitor(dp, w.clk, 30*time.Second, func() {
		w.reloads = append(w.reloads, w.clk.Since(t0))
	}, func(detail string, err error) {
		if err != nil {
			detail += ": " + err.Error()
		}
		w.notes = append(w.notes, detail)
	})
	return w
}

func (w *watched) at(d time.Duration) { w.clk.AdvanceTo(t0.Add(d)) }

func (w *watched) canaries(t *testing.T) []string {
	t.Helper()
	var in []string
	for _, table := range iptables.CanaryTables {
		ok, err := w.ipt.ChainExists(table, iptables.ChainCanary)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			in = append(in, table)
		}
	}
	return in
}

func (w *watched) flush(t *testing.T, tables ...string) {
	t.Helper()
	for _, table := range tables {
		if err := w.ipt.Flush(table); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMonitorCreatesTheCanaryInEveryTableAtOnce(t *testing.T) {
	w := watch(t, nil, fakes.NewIPTables())
	if got := w.canaries(t); len(got) != 3 {
		t.Fatalf("canary in %v, want mangle, nat and filter", got)
	}
	if !strings.Contains(w.ipt.Ruleset().Save("mangle"), ":KUBE-PROXY-CANARY - [0:0]") {
		t.Errorf("mangle save lacks the canary:\n%s", w.ipt.Ruleset().Save("mangle"))
	}
}

// A whole flush is found at the next look, interval after the last one,
// and answered at once; the canaries are back after the reload.
func TestMonitorReloadsAtTheNextLookAfterAFlush(t *testing.T) {
	w := watch(t, nil, fakes.NewIPTables())
	w.at(40 * time.Second)
	w.flush(t, "mangle", "nat", "filter")
	w.at(59 * time.Second)
	if len(w.reloads) != 0 || len(w.canaries(t)) != 0 {
		t.Fatalf("before the next look: reloads %v, canaries %v", w.reloads, w.canaries(t))
	}
	w.at(60 * time.Second)
	if len(w.reloads) != 1 || w.reloads[0] != 60*time.Second {
		t.Fatalf("reloads at %v, want [60s]", w.reloads)
	}
	if got := w.canaries(t); len(got) != 3 {
		t.Errorf("after the reload the canary is in %v, want all three", got)
	}
	// Looking goes on from the reload: a second flush at 70s is found at 90s.
	w.flush(t, "mangle", "nat", "filter")
	w.at(120 * time.Second)
	if len(w.reloads) != 2 || w.reloads[1] != 90*time.Second {
		t.Errorf("reloads at %v, want [60s 90s]", w.reloads)
	}
}

// Only the first table is looked at: nat and filter flushed, mangle kept,
// nothing happens.
func TestMonitorLooksOnlyAtTheFirstTable(t *testing.T) {
	w := watch(t, nil, fakes.NewIPTables())
	w.flush(t, "nat", "filter")
	w.at(10 * time.Minute)
	if len(w.reloads) != 0 {
		t.Errorf("reloads at %v, want none: the mangle canary is still there", w.reloads)
	}
}

// The first canary gone, the others still there: the monitor waits for
// them every 100ms, for 5s at most, then reloads anyway.
func TestMonitorWaitsForTheOtherTablesThenGivesUp(t *testing.T) {
	w := watch(t, nil, fakes.NewIPTables())
	w.flush(t, "mangle")
	w.at(34*time.Second + 999*time.Millisecond)
	if len(w.reloads) != 0 {
		t.Fatalf("reloaded at %v before the 5s wait ended", w.reloads)
	}
	w.at(35 * time.Second)
	if len(w.reloads) != 1 || w.reloads[0] != 35*time.Second {
		t.Fatalf("reloads at %v, want [35s]", w.reloads)
	}
	if !strings.Contains(strings.Join(w.notes, "\n"), "inconsistent") {
		t.Errorf("notes %q do not say the state was inconsistent", w.notes)
	}

	// The rest of a flush under way shows up within the wait: the reload
	// follows the first look that finds it, on the 100ms grid.
	w2 := watch(t, nil, fakes.NewIPTables())
	w2.flush(t, "mangle")
	w2.at(30*time.Second + 250*time.Millisecond)
	w2.flush(t, "nat", "filter")
	w2.at(40 * time.Second)
	if len(w2.reloads) != 1 || w2.reloads[0] != 30*time.Second+300*time.Millisecond {
		t.Errorf("reloads at %v, want [30.3s]", w2.reloads)
	}
}

func TestMonitorStopsForGood(t *testing.T) {
	w := watch(t, nil, fakes.NewIPTables())
	w.m.Stop()
	w.flush(t, "mangle", "nat", "filter")
	w.at(10 * time.Minute)
	if len(w.reloads) != 0 {
		t.Errorf("a stopped monitor reloaded at %v", w.reloads)
	}
}

// failingLook cannot tell whether a chain exists.
type failingLook struct {
	*fakes.IPTables
	fail bool
}

func (f *failingLook) ChainExists(table, chain string) (bool, error) {
	if f.fail {
		return false, errors.New("chain `KUBE-PROXY-CANARY' in table `mangle' is incompatible, use 'nft' tool")
	}
	return f.IPTables.ChainExists(table, chain)
}

// A look that fails is taken for a flush, as kube-proxy takes it (no error
// of its ChainExists passes isResourceError): the monitor notes the error
// and reloads, and, looks failing on, at every interval.
func TestMonitorTakesAFailedLookForAFlush(t *testing.T) {
	ipt := fakes.NewIPTables()
	dp := &failingLook{IPTables: ipt}
	w := watch(t, dp, ipt)
	dp.fail = true
	w.at(61 * time.Second)
	if len(w.reloads) != 2 || w.reloads[0] != 30*time.Second || w.reloads[1] != 60*time.Second {
		t.Fatalf("reloads at %v, want [30s 1m0s]", w.reloads)
	}
	if !strings.Contains(w.notes[0], "taken as gone: chain `KUBE-PROXY-CANARY' in table `mangle' is incompatible") {
		t.Errorf("notes %q do not show the failed look", w.notes)
	}
	dp.fail = false
	w.at(5 * time.Minute)
	if len(w.reloads) != 2 {
		t.Errorf("reloads at %v once the looks work again, want no more", w.reloads)
	}
}
