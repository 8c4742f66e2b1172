package iptablesmode

import (
	"fmt"
	"net"
	"strings"

	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/routeexpect"
	"github.com/proxysim/proxysim/sim/iptables"
)

// Kernel is a real iptables a replay programs: a network namespace's, say
// (netns.IPTablesDataplane). Besides taking the proxier's operations it
// checks itself against what the mode knows.
type Kernel interface {
	iptables.Dataplane
	// Name says which kernel and iptables ("netns, kernel 6.1.0, iptables
	// v1.8.9 (nf_tables)").
	Name() string
	// Verify reports how the kernel's filter and nat tables differ from
	// want (iptables-save text), by meaning: the kernel prints rules back
	// in its own spelling.
	Verify(want string) error
	// CheckRouteWith sends real connections as pkt describes, each
	// starting from the recent lists given (list name -> sources), and
	// reports an error when where they went disagrees with the predicted
	// shares.
	CheckRouteWith(pkt iptables.Packet, predicted iptables.Shares, affinity map[string][]string) error
	// Flush is `iptables -t table -F` and `-X` run on the node, from
	// outside the proxier (the iptablesFlush step).
	Flush(table string) error
	Close() error
}

// OnKernel binds the mode to a real kernel: open returns a fresh one for
// a replay, given the scenario's node IPs. The proxier programs the kernel
// and, in step, an in-memory copy (fakes.IPTables) that holds what was
// written; every expectation first checks that the kernel holds the same
// rules. Then an iptables golden is the copy's iptables-save (the text
// proxysim writes, which the fake dataplane's goldens hold), and a route
// is the tracer's shares over those rules, checked against real
// connections on the kernel. The caller wires open to netns, which knows
// nothing of scenarios.
func OnKernel(open func(nodeIPs []string) (Kernel, error)) scenarios.DataplaneFactory {
	return func(s *scenarios.Scenario, clk clock.PassiveClock) (scenarios.Dataplane, error) {
		set, ok := s.Proxy.Settings.(*Settings)
		if !ok {
			return nil, fmt.Errorf("%s: an iptables dataplane replays mode %s scenarios, not mode %q", s.File, Name, s.Proxy.Mode)
		}
		k, err := open(set.NodeIPs)
		if err != nil {
			return nil, err
		}
		mirror := fakes.NewIPTables()
		return &Dataplane{
			name:   k.Name(),
			cfg:    iptables.Config{ClusterCIDR: set.ClusterCIDR, MasqueradeAll: set.MasqueradeAll, SyncPeriod: syncPeriodOf(s.Proxy)},
			raw:    mirror,
			faults: iptables.WithFaults(&inStep{kernel: k, mirror: mirror}), nodeIPs: set.nodeIPs,
			kernel: k, clk: clk, recent: iptables.Recent{},
		}, nil
	}
}

// inStep applies every operation to the kernel and to the in-memory mirror.
// The kernel decides: an operation it refuses fails; one of them taking
// what the other refuses is a disagreement, which fails too (and, when
// the kernel took it, leaves the two apart for Verify to show).
type inStep struct {
	kernel Kernel
	mirror *fakes.IPTables
}

func (t *inStep) Restore(payload string) error {
	kerr := t.kernel.Restore(payload)
	if kerr != nil {
		if _, ferr := iptables.Apply(t.mirror.Ruleset(), payload); ferr == nil {
			return fmt.Errorf("the kernel refused a restore the fake takes: %w", kerr)
		}
		return kerr
	}
	if ferr := t.mirror.Restore(payload); ferr != nil {
		return fmt.Errorf("the kernel took a restore the fake refuses: %w", ferr)
	}
	return nil
}

// Save reads the kernel: the proxier looks there for stale chains.
func (t *inStep) Save(table string) (string, error) { return t.kernel.Save(table) }

func (t *inStep) EnsureChain(table, chain string) error {
	if err := t.kernel.EnsureChain(table, chain); err != nil {
		return err
	}
	return t.mirror.EnsureChain(table, chain)
}

func (t *inStep) EnsureRule(table, chain, rule string) error {
	if err := t.kernel.EnsureRule(table, chain, rule); err != nil {
		return err
	}
	return t.mirror.EnsureRule(table, chain, rule)
}

// ChainExists asks the kernel (the canary monitor's question); the copy
// must agree, or the answer is an error: an empty chain is no rule, so
// Verify would not see the two apart.
func (t *inStep) ChainExists(table, chain string) (bool, error) {
	ok, err := t.kernel.ChainExists(table, chain)
	if err != nil {
		return false, err
	}
	if mine, _ := t.mirror.ChainExists(table, chain); mine != ok {
		return ok, fmt.Errorf("the kernel says chain %s in %s exists: %v, the fake: %v", chain, table, ok, mine)
	}
	return ok, nil
}

// flush empties a table in the kernel and in the copy.
func (t *inStep) flush(table string) error {
	if err := t.kernel.Flush(table); err != nil {
		return err
	}
	return t.mirror.Flush(table)
}

// kernelSnapshot is the copy's iptables-save once the kernel is shown to
// hold the same rules.
func (d *Dataplane) kernelSnapshot() (string, error) {
	want := d.raw.SaveAll()
	if err := d.kernel.Verify(want); err != nil {
		return "", err
	}
	return want, nil
}

// kernelRoute traces pkt through the copy's rules, once the kernel is
// shown to hold them, and checks the shares against real connections,
// each starting from the part of the clients' history still live (real
// time does not follow the virtual clock, so the kernel is handed the
// lists the tracer judged fresh, not asked to judge their age).
func (d *Dataplane) kernelRoute(pkt iptables.Packet) (iptables.Shares, map[string][]string, error) {
	if err := d.kernel.Verify(d.raw.SaveAll()); err != nil {
		return nil, nil, err
	}
	h := d.history()
	shares, sets, err := iptables.RouteWith(d.raw.Ruleset(), d.nodeIPs, pkt, h)
	if err != nil {
		return nil, nil, err
	}
	if err := d.kernel.CheckRouteWith(pkt, shares, h.Live(d.raw.Ruleset())); err != nil {
		return nil, nil, fmt.Errorf("the tracer says %s, the kernel disagrees: %w", shares, err)
	}
	return shares, sets, nil
}

// HasRoute reports whether a scenario has a route expectation: what a run
// on a kernel measures with real connections.
func HasRoute(s *scenarios.Scenario) bool {
	for _, st := range s.Timeline {
		if st.Expect == nil {
			continue
		}
		for _, c := range st.Expect.Checks {
			if r, ok := c.(*routeexpect.Expect); ok && r.Route != nil {
				return true
			}
		}
	}
	return false
}

// KernelRoute is a connection a replay on a kernel measures with real
// connections: a route expectation or a connection step.
type KernelRoute struct {
	// Where is the expectation or step (its path in the file, and line).
	Where string
	// Protocol (TCP, UDP, SCTP), From (an IP) and To (ip:port) are as
	// netns.Measurement spells them.
	Protocol, From, To string
}

// Key is "PROTOCOL FROM -> TO".
func (k KernelRoute) Key() string { return k.Protocol + " " + k.From + " -> " + k.To }

// KernelRoutes lists, in timeline order, every connection a kernel
// replay of s measures: each route expectation and each connection step.
func KernelRoutes(s *scenarios.Scenario) []KernelRoute {
	var out []KernelRoute
	add := func(src scenarios.Src, from, to, protocol string) {
		if ip := net.ParseIP(from); ip != nil {
			from = ip.String()
		}
		if protocol == "" {
			protocol = "TCP"
		}
		if host, port, err := net.SplitHostPort(to); err == nil {
			if ip := net.ParseIP(host); ip != nil {
				to = net.JoinHostPort(ip.String(), port)
			}
		}
		out = append(out, KernelRoute{Where: fmt.Sprintf("%s (line %d)", src.Path, src.Line), Protocol: strings.ToUpper(protocol), From: from, To: to})
	}
	for _, st := range s.Timeline {
		for _, a := range st.Actions {
			if c, ok := a.(*connectionStep); ok && c.Connection != nil {
				add(c.Connection.Src, c.Connection.From, c.Connection.To, c.Connection.Protocol)
			}
		}
		if st.Expect == nil {
			continue
		}
		for _, c := range st.Expect.Checks {
			if r, ok := c.(*routeexpect.Expect); ok && r.Route != nil {
				add(r.Route.Src, r.Route.From, r.Route.To, r.Route.Protocol)
			}
		}
	}
	return out
}
