package iptables

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/proxy"
)

// Dataplane is what the proxier programs: iptables as kube-proxy drives
// it. fakes.IPTables implements it in memory; a real-kernel binding would
// exec iptables-restore and iptables-save.
type Dataplane interface {
	// Restore is `iptables-restore --noflush --counters` of a whole
	// payload: all of it applies, or none of it and an error.
	Restore(payload string) error
	// Save is `iptables-save -t table`.
	Save(table string) (string, error)
	// EnsureChain creates a user chain if it does not exist.
	EnsureChain(table, chain string) error
	// EnsureRule prepends a rule to a chain unless an identical one is
	// there (`iptables -C`, then `-I chain 1`).
	EnsureRule(table, chain, rule string) error
	// ChainExists is `iptables -t table -S chain`: whether the chain is
	// there (the canary Monitor asks). A missing chain is false and no
	// error; an error says the look failed (the Monitor takes it for a
	// no, as kube-proxy does).
	ChainExists(table, chain string) (bool, error)
}

// jump is one of kube-proxy's jumps from a built-in chain into its own,
// ensured outside the restore payload, on full syncs only (kube-proxy's
// iptablesJumpChains and iptablesKubeletJumpChains).
type jump struct {
	table, from, to, comment, extra string
}

var jumps = []jump{
	{"filter", "INPUT", ChainExternalServices, "kubernetes externally-visible service portals", "-m conntrack --ctstate NEW"},
	{"filter", "FORWARD", ChainExternalServices, "kubernetes externally-visible service portals", "-m conntrack --ctstate NEW"},
	{"filter", "INPUT", ChainNodePorts, "kubernetes health check service ports", ""},
	{"filter", "FORWARD", ChainServices, "kubernetes service portals", "-m conntrack --ctstate NEW"},
	{"filter", "OUTPUT", ChainServices, "kubernetes service portals", "-m conntrack --ctstate NEW"},
	{"filter", "FORWARD", ChainForward, "kubernetes forwarding rules", ""},
	{"filter", "INPUT", ChainProxyFirewall, "kubernetes load balancer firewall", "-m conntrack --ctstate NEW"},
	{"filter", "OUTPUT", ChainProxyFirewall, "kubernetes load balancer firewall", "-m conntrack --ctstate NEW"},
	{"filter", "FORWARD", ChainProxyFirewall, "kubernetes load balancer firewall", "-m conntrack --ctstate NEW"},
	{"nat", "OUTPUT", ChainServices, "kubernetes service portals", ""},
	{"nat", "PREROUTING", ChainServices, "kubernetes service portals", ""},
	{"nat", "POSTROUTING", ChainPostrouting, "kubernetes postrouting rules", ""},
	{"filter", "INPUT", ChainKubeletFirewall, "", ""},
	{"filter", "OUTPUT", ChainKubeletFirewall, "", ""},
}

// rule is the jump as kube-proxy passes it to `iptables -I`: the extra
// matches first, then the comment, then the target.
func (j jump) rule() string {
	var w []string
	if j.extra != "" {
		w = append(w, j.extra)
	}
	if j.comment != "" {
		w = append(w, "-m", "comment", "--comment", quote(j.comment))
	}
	return strings.Join(append(w, "-j", j.to), " ")
}

// Metrics are kube-proxy's iptables-mode metrics as exact values
// (pkg/proxy/metrics/metrics.go; FACTS §5): what the proxier would have
// published after its last sync.
type Metrics struct {
	// RestoreFailures is kubeproxy_sync_proxy_rules_iptables_restore_failures_total.
	RestoreFailures int
	// PartialRestoreFailures is
	// kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total:
	// failed syncs that were partial.
	PartialRestoreFailures int
	// RulesTotal is kubeproxy_sync_proxy_rules_iptables_total{table}: the
	// rules kube-proxy owns, written or left alone by a partial sync.
	RulesTotal map[string]int
	// RulesLast is kubeproxy_sync_proxy_rules_iptables_last{table}: the
	// rules the last sync wrote.
	RulesLast map[string]int
	// NoLocalEndpoints is
	// kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy}
	// ("internal", "external"), set by successful syncs only.
	NoLocalEndpoints map[string]int
	// FullSyncs and PartialSyncs count the syncs that ran (what the
	// sync_full/partial_proxy_rules_duration_seconds histograms count),
	// failed ones included.
	FullSyncs, PartialSyncs int
}

func (m Metrics) clone() Metrics {
	c := m
	c.RulesTotal = maps.Clone(m.RulesTotal)
	c.RulesLast = maps.Clone(m.RulesLast)
	c.NoLocalEndpoints = maps.Clone(m.NoLocalEndpoints)
	return c
}

// Proxier is the iptables backend: kube-proxy v1.36's syncProxyRules over
// a Dataplane. A full sync at start, after any failure and, outside
// large-cluster mode, once FullSyncPeriod has passed since the last; every
// other sync is partial: the fixed chains and the filter table whole, but
// only the changed services' own nat chains. A failed restore fails it.
type Proxier struct {
	cfg   Config
	dp    Dataplane
	clk   clock.PassiveClock
	trace func(op, detail string, err error)

	needFullSync bool
	lastFullSync time.Time
	// large is large-cluster mode as the last sync found it: the hourly
	// full sync looks at this, before the sync recomputes it.
	large bool
	// lastCleanup is when stale chains were last looked for.
	lastCleanup time.Time
	cleaned     bool

	metrics Metrics
	names   *names
	monitor *Monitor

	// work is what the last sync wrote and read, until the world takes it.
	work     *sim.IPTablesWork
	workFull bool
}

// New builds a proxier over dp on clk (which times full syncs and the
// stale-chain cleanup of large-cluster mode); trace, if not nil, hears
// every dataplane operation.
func New(cfg Config, dp Dataplane, clk clock.PassiveClock, trace func(op, detail string, err error)) *Proxier {
	if trace == nil {
		trace = func(string, string, error) {}
	}
	return &Proxier{cfg: cfg, dp: dp, clk: clk, trace: trace, needFullSync: true, names: newNames(),
		metrics: Metrics{RulesTotal: map[string]int{}, RulesLast: map[string]int{}, NoLocalEndpoints: map[string]int{}}}
}

// ForceFullSync makes the next sync full, as kube-proxy's canary monitor
// (forceSyncProxyRules) and a change of the node's topology labels
// (OnTopologyChange) do.
func (p *Proxier) ForceFullSync() { p.needFullSync = true }

// StartMonitor starts kube-proxy's canary monitor over the proxier's
// dataplane, every SyncPeriod, as NewProxier does: when it finds the
// tables flushed it makes the next sync full (ForceFullSync) and calls
// syncNow, which must sync at once, outside the runner
// (forceSyncProxyRules calls syncProxyRules directly). Stop stops it.
func (p *Proxier) StartMonitor(clk clock.WithDelayedExecution, syncNow func(), note func(detail string, err error)) {
	p.monitor = StartMonitor(p.dp, clk, p.cfg.SyncPeriod, func() {
		p.ForceFullSync()
		syncNow()
	}, note)
}

// Stop stops the proxier's monitor, if it has one: a restart replaces the
// proxier.
func (p *Proxier) Stop() {
	if p.monitor != nil {
		p.monitor.Stop()
	}
}

// Metrics returns a copy of the proxier's metrics.
func (p *Proxier) Metrics() Metrics { return p.metrics.clone() }

// Backend returns a sim.Config.NewBackend that programs dp, tracing each
// restore. Each restart builds a new proxier over the same dataplane.
func Backend(cfg Config, dp Dataplane) func(*sim.World) (proxy.Backend, error) {
	return func(w *sim.World) (proxy.Backend, error) {
		return New(cfg, dp, w.Clock, w.TraceDataplane), nil
	}
}

// Sync is one sync, full or partial as kube-proxy decides it. A failed
// sync makes the next one full: the change trackers are already drained.
func (p *Proxier) Sync(st *proxy.SyncState) error {
	// kube-proxy asks for more than FullSyncPeriod since the last full
	// sync; its runner's periodic run comes FullSyncPeriod after that
	// sync completed, which in real time is always a little more. In
	// virtual time it is exactly that, hence at least.
	full := p.needFullSync || (p.clk.Since(p.lastFullSync) >= FullSyncPeriod && !p.large)
	p.work, p.workFull = &sim.IPTablesWork{}, full
	if full {
		p.metrics.FullSyncs++
	} else {
		p.metrics.PartialSyncs++
	}
	if err := p.sync(st, full); err != nil {
		if !full {
			p.metrics.PartialRestoreFailures++
		}
		p.needFullSync = true
		return err
	}
	if full {
		p.lastFullSync = p.clk.Now()
	}
	p.needFullSync = false
	return nil
}

func (p *Proxier) sync(st *proxy.SyncState, full bool) error {
	work := p.work
	if full {
		// The jumps from the built-in chains are not part of the restore
		// (it must not replace the built-in chains); a full sync makes sure
		// they exist, so a flushed table heals at the next one.
		for _, j := range jumps {
			work.EnsureChains++
			if err := p.dp.EnsureChain(j.table, j.to); err != nil {
				p.trace("ensure-chain", j.table+" "+j.to, err)
				return fmt.Errorf("iptables: ensure chain %s: %w", j.to, err)
			}
			work.EnsureRules++
			if err := p.dp.EnsureRule(j.table, j.from, j.rule()); err != nil {
				p.trace("ensure-rule", j.table+" "+j.from+" -> "+j.to, err)
				return fmt.Errorf("iptables: ensure jump %s -> %s: %w", j.from, j.to, err)
			}
		}
	}
	pl := plan{full: full, large: LargeCluster(st), names: p.names}
	p.large = pl.large
	if !full {
		pl.changed = map[types.NamespacedName]bool{}
		for _, n := range st.Changed() {
			pl.changed[n] = true
		}
	}
	// Stale chains are looked for with an iptables-save of nat at every
	// sync, or at most once per SyncPeriod in large-cluster mode (saving a
	// huge table is slow). kube-proxy only logs a failed save and skips the
	// cleanup; a read is no dataplane write, so it is not traced as one.
	now := p.clk.Now()
	if !pl.large || !p.cleaned || now.Sub(p.lastCleanup) > p.cfg.SyncPeriod {
		save, err := p.dp.Save("nat")
		work.Saves++
		work.SavedLines, work.SavedBytes = strings.Count(save, "\n"), len(save)
		if err == nil {
			pl.existingNAT, pl.cleanup = chainsOf(save), true
			p.lastCleanup, p.cleaned = now, true
		}
	}
	r := render(p.cfg, st, pl)
	// kube-proxy sets the rule gauges before the restore, so a failed one
	// leaves them at what it tried to write.
	p.metrics.RulesTotal["filter"] = r.filterRules
	p.metrics.RulesLast["filter"] = r.filterRules
	p.metrics.RulesTotal["nat"] = r.natRules + r.skippedNATRules - r.deletedChains
	p.metrics.RulesLast["nat"] = r.natRules - r.deletedChains
	work.TableRules = p.metrics.RulesTotal["filter"] + p.metrics.RulesTotal["nat"]
	work.Restores++
	work.Filter, work.NAT = r.filter, r.nat
	err := p.dp.Restore(r.payload)
	kind := "partial"
	if full {
		kind = "full"
	}
	p.trace("restore", kind+": "+summary(r.payload), err)
	if err != nil {
		p.metrics.RestoreFailures++
		return fmt.Errorf("iptables: %w", err)
	}
	p.metrics.NoLocalEndpoints["internal"] = r.noLocalInternal
	p.metrics.NoLocalEndpoints["external"] = r.noLocalExternal
	return nil
}

// TakeSyncWork returns what the last sync wrote and read (sim.WorkReporter),
// once.
func (p *Proxier) TakeSyncWork() (sim.SyncWork, bool) {
	if p.work == nil {
		return sim.SyncWork{}, false
	}
	w := sim.SyncWork{Full: p.workFull, IPTables: p.work}
	p.work = nil
	return w, true
}

var _ sim.WorkReporter = (*Proxier)(nil)

// chainsOf lists the chains declared in iptables-save text.
func chainsOf(save string) []string {
	var out []string
	for rest := save; rest != ""; {
		var l string
		l, rest, _ = strings.Cut(rest, "\n")
		if strings.HasPrefix(l, ":") {
			name, _, _ := strings.Cut(l[1:], " ")
			out = append(out, name)
		}
	}
	return out
}

// summary counts a payload's chain lines and rules per table, for traces.
func summary(payload string) string {
	var parts []string
	table, chains, rules := "", 0, 0
	for _, l := range strings.Split(payload, "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			table, chains, rules = l[1:], 0, 0
		case strings.HasPrefix(l, ":"):
			chains++
		case strings.HasPrefix(l, "-"):
			rules++
		case l == "COMMIT":
			parts = append(parts, fmt.Sprintf("%s %d chains %d rules", table, chains, rules))
		}
	}
	return strings.Join(parts, ", ")
}

// ParseSave reads iptables-save text (of any of the modelled tables) into a
// ruleset, refusing what a restore would refuse.
func ParseSave(text string) (Ruleset, error) { return Apply(NewRuleset(), text) }

// ErrInjected is the error of a restore failed by Faults.
var ErrInjected = errors.New("injected restore failure")

// Faults makes restores fail on demand, in front of any dataplane.
type Faults struct {
	Dataplane
	armed sim.ArmedFailures
}

// WithFaults wraps dp; nothing fails until FailNext is called.
func WithFaults(dp Dataplane) *Faults { return &Faults{Dataplane: dp} }

// FailNext makes the next n restores fail without reaching the dataplane.
func (f *Faults) FailNext(n int) { f.armed.Add(n) }

func (f *Faults) Restore(payload string) error {
	if f.armed.Take() {
		return &RestoreError{Msg: ErrInjected.Error()}
	}
	return f.Dataplane.Restore(payload)
}
