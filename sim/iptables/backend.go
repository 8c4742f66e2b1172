package iptables

import (
	"errors"
	"fmt"
	"strings"
	"time"

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
}

// jump is one of kube-proxy's jumps from a built-in chain into its own,
// ensured outside the restore payload (kube-proxy's iptablesJumpChains and
// the kubelet-compatible firewall jumps).
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

func (j jump) rule() string {
	var w []string
	if j.comment != "" {
		w = append(w, "-m", "comment", "--comment", quote(j.comment))
	}
	if j.extra != "" {
		w = append(w, j.extra)
	}
	return strings.Join(append(w, "-j", j.to), " ")
}

// Proxier is the iptables backend: every sync is a full sync (kube-proxy's
// partial syncs are not modelled yet), and a failed restore fails it.
type Proxier struct {
	cfg   Config
	dp    Dataplane
	clk   clock.PassiveClock
	trace func(op, detail string, err error)

	// lastCleanup is when stale chains were last looked for; zero before
	// the first time, so a new proxier always looks.
	lastCleanup time.Time
	cleaned     bool
}

// New builds a proxier over dp on clk (which times the stale-chain cleanup
// of large-cluster mode); trace, if not nil, hears every dataplane
// operation.
func New(cfg Config, dp Dataplane, clk clock.PassiveClock, trace func(op, detail string, err error)) *Proxier {
	if trace == nil {
		trace = func(string, string, error) {}
	}
	return &Proxier{cfg: cfg, dp: dp, clk: clk, trace: trace}
}

// Backend returns a sim.Config.NewBackend that programs dp, tracing each
// restore. Each restart builds a new proxier over the same dataplane.
func Backend(cfg Config, dp Dataplane) func(*sim.World) (proxy.Backend, error) {
	return func(w *sim.World) (proxy.Backend, error) {
		return New(cfg, dp, w.Clock, w.TraceDataplane), nil
	}
}

// Sync is one full sync: ensure the jumps into kube-proxy's chains, read
// the nat table's chains back to find stale ones, and restore the whole
// payload.
func (p *Proxier) Sync(st *proxy.SyncState) error {
	for _, j := range jumps {
		if err := p.dp.EnsureChain(j.table, j.to); err != nil {
			p.trace("ensure-chain", j.table+" "+j.to, err)
			return fmt.Errorf("iptables: ensure chain %s: %w", j.to, err)
		}
		if err := p.dp.EnsureRule(j.table, j.from, j.rule()); err != nil {
			p.trace("ensure-rule", j.table+" "+j.from+" -> "+j.to, err)
			return fmt.Errorf("iptables: ensure jump %s -> %s: %w", j.from, j.to, err)
		}
	}
	// Stale chains are looked for with an iptables-save of nat at every
	// sync, or at most once per SyncPeriod in large-cluster mode (saving a
	// huge table is slow). kube-proxy only logs a failed save and skips the
	// cleanup; a read is no dataplane write, so it is not traced as one.
	var existing []string
	now := p.clk.Now()
	large := LargeCluster(st)
	if !large || !p.cleaned || now.Sub(p.lastCleanup) > p.cfg.SyncPeriod {
		if save, err := p.dp.Save("nat"); err == nil {
			existing = chainsOf(save)
			p.lastCleanup, p.cleaned = now, true
		}
	}
	payload := render(p.cfg, st, existing, large)
	err := p.dp.Restore(payload)
	p.trace("restore", summary(payload), err)
	if err != nil {
		return fmt.Errorf("iptables: %w", err)
	}
	return nil
}

// chainsOf lists the chains declared in iptables-save text.
func chainsOf(save string) []string {
	var out []string
	for _, l := range strings.Split(save, "\n") {
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
	failNext int
}

// WithFaults wraps dp; nothing fails until FailNext is called.
func WithFaults(dp Dataplane) *Faults { return &Faults{Dataplane: dp} }

// FailNext makes the next n restores fail without reaching the dataplane.
func (f *Faults) FailNext(n int) { f.failNext += n }

func (f *Faults) Restore(payload string) error {
	if f.failNext > 0 {
		f.failNext--
		return &RestoreError{Msg: ErrInjected.Error()}
	}
	return f.Dataplane.Restore(payload)
}
