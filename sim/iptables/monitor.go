package iptables

import (
	"fmt"
	"time"

	"k8s.io/utils/clock"
)

// ChainCanary is kube-proxy's canary chain (kubeProxyCanaryChain in
// pkg/proxy/iptables/proxier.go): an empty chain it keeps in the mangle,
// nat and filter tables so that it notices when someone else flushed them.
const ChainCanary = "KUBE-PROXY-CANARY"

// CanaryTables are the tables the iptables proxier watches, in the order
// it passes them to the monitor: the first is the one polled.
var CanaryTables = []string{"mangle", "nat", "filter"}

// The monitor's pace once the first canary is gone: it looks at the other
// tables every FlushPollTime and gives up waiting after FlushTimeout
// (pkg/util/iptables/iptables.go, iptablesFlushPollTime and
// iptablesFlushTimeout).
const (
	FlushPollTime = 100 * time.Millisecond
	FlushTimeout  = 5 * time.Second
)

// Monitor is kube-proxy's iptables canary monitor (pkg/util/iptables
// iptables.go, runner.Monitor, which NewProxier starts with syncPeriod as
// its interval) on a clock with timers, so that a virtual clock drives it:
//
//  1. it creates the canary chain in every table at once, and tries again
//     every interval until all of them exist;
//  2. then, every interval, it asks whether the canary still exists in the
//     first table;
//  3. when it does not, it waits until the canary is gone from the other
//     tables too (looking at once, then every FlushPollTime, for at most
//     FlushTimeout, after which it goes on anyway), so as not to reload
//     while the flush is under way;
//  4. it calls reload (kube-proxy's forceSyncProxyRules: the next sync is
//     full, and it runs at once) and starts over at 1.
//
// A look that fails counts as "gone", as in kube-proxy: it waits on with a
// failed look only when isResourceError says the error is exit status 4
// (the xtables lock), but ChainExists wraps the exec error (%w) and
// isResourceError type-asserts it without unwrapping, so no error from a
// look ever counts as that. (iptables-nft 1.8.9 answers `-S` of a chain
// that does not exist with "chain ... is incompatible, use 'nft' tool",
// an error, where legacy iptables says "No chain/target/match": kube-proxy
// reloads all the same.) Nothing here reads the wall clock.
type Monitor struct {
	dp       Dataplane
	clk      clock.WithDelayedExecution
	interval time.Duration
	reload   func()
	note     func(detail string, err error)

	timer   clock.Timer
	stopped bool
}

// StartMonitor starts a monitor over dp: it creates the canaries now and
// arms its first timer. note, if not nil, hears what the monitor sees
// (canaries gone, reloads, failures); it is no dataplane write.
func StartMonitor(dp Dataplane, clk clock.WithDelayedExecution, interval time.Duration, reload func(), note func(detail string, err error)) *Monitor {
	if note == nil {
		note = func(string, error) {}
	}
	if interval <= 0 {
		interval = 30 * time.Second // kube-proxy's default syncPeriod
	}
	m := &Monitor{dp: dp, clk: clk, interval: interval, reload: reload, note: note}
	m.ensure()
	return m
}

// Stop disarms the monitor; nothing it scheduled runs any more. The
// canaries stay (kube-proxy's monitor runs until the process ends).
func (m *Monitor) Stop() {
	m.stopped = true
	if m.timer != nil {
		m.timer.Stop()
	}
}

func (m *Monitor) after(d time.Duration, f func()) {
	m.timer = m.clk.AfterFunc(d, func() {
		if !m.stopped {
			f()
		}
	})
}

// ensure is step 1.
func (m *Monitor) ensure() {
	for _, t := range CanaryTables {
		if err := m.dp.EnsureChain(t, ChainCanary); err != nil {
			m.note(fmt.Sprintf("iptables canary: cannot create %s in %s", ChainCanary, t), err)
			m.after(m.interval, m.ensure)
			return
		}
	}
	m.after(m.interval, m.poll)
}

// poll is step 2.
func (m *Monitor) poll() {
	first := CanaryTables[0]
	ok, err := m.dp.ChainExists(first, ChainCanary)
	if ok {
		m.after(m.interval, m.poll)
		return
	}
	if err != nil {
		m.note(fmt.Sprintf("iptables canary: looking for %s in %s failed, taken as gone", ChainCanary, first), err)
	}
	m.note(fmt.Sprintf("iptables canary %s gone from %s", ChainCanary, first), nil)
	m.waitFlushed(0)
}

// waitFlushed is step 3, waited has passed since the first canary was
// found gone.
func (m *Monitor) waitFlushed(waited time.Duration) {
	for _, t := range CanaryTables[1:] {
		if ok, _ := m.dp.ChainExists(t, ChainCanary); ok { // an error is "gone" here too
			if waited+FlushPollTime >= FlushTimeout {
				m.after(FlushTimeout-waited, func() {
					m.note(fmt.Sprintf("iptables canary: still in %s after %v, inconsistent iptables state", t, FlushTimeout), nil)
					m.reloadNow()
				})
				return
			}
			m.after(FlushPollTime, func() { m.waitFlushed(waited + FlushPollTime) })
			return
		}
	}
	m.reloadNow()
}

// reloadNow is step 4.
func (m *Monitor) reloadNow() {
	m.note("iptables flushed: forcing a full sync", nil)
	m.reload()
	if !m.stopped {
		m.ensure()
	}
}
