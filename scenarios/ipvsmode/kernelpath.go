package ipvsmode

import (
	"fmt"

	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/route"
)

// PathKernel is a real kernel that holds the IPVS mode's whole packet
// path (netns.IPVSPathNode): IPVS, kube-ipvs0, the ipsets and the iptables
// rules, with pods and outside addresses around the node to connect from.
type PathKernel interface {
	// Programmed is the kernel's dataplane, ipsets and iptables included.
	Programmed() ipvs.Dataplane
	// Verify reports how the kernel's ipsets and rules differ from those
	// written (ipvs.SaveIPSets text; iptables-save text, by meaning).
	Verify(wantSets, wantRules string) error
	// CheckRoute sends real connections as pkt describes and reports an
	// error when where they went, or which arrived masqueraded, disagrees
	// with the tracer's shares and masqueraded parts.
	CheckRoute(pkt route.Packet, predicted, masq route.Shares) error
	Close() error
}

// OnKernelPacketPath binds the mode to a real kernel that holds the packet
// path: open returns a fresh one for a replay, given the scenario's node
// IPs (the caller wires it to netns, which knows no scenarios). The
// proxier programs the kernel and, in step, in-memory copies of the ipsets
// and iptables (fakes.IPSets, fakes.IPTables) that hold what was written;
// the tracer reads the copies and the kernel's own IPVS table, once the
// kernel is shown to hold the same sets and rules, and each `route`
// expectation is then measured with real connections on the kernel.
func OnKernelPacketPath(open func(nodeIPs []string) (PathKernel, error)) scenarios.DataplaneFactory {
	return func(s *scenarios.Scenario, _ clock.PassiveClock) (scenarios.Dataplane, error) {
		set, err := settingsOf(s)
		if err != nil {
			return nil, err
		}
		if !set.PacketPath {
			return nil, fmt.Errorf("%s: this dataplane replays proxy.packetPath scenarios", s.File)
		}
		k, err := open(set.NodeIPs)
		if err != nil {
			return nil, err
		}
		dp := k.Programmed()
		p := &pathOnKernel{kernel: k, sets: fakes.NewIPSets(), rules: fakes.NewIPTables(), verified: -1}
		// A kernel handle that queues its set writes (netns.IPSets) applies
		// them before any rule that may name a set is written.
		flushSets := func() error { return nil }
		if f, ok := dp.IPSets.(interface{ Flush() error }); ok {
			flushSets = f.Flush
		}
		dp.IPSets = &inStepSets{kernel: dp.IPSets, mirror: p.sets, writes: &p.writes, created: map[string]bool{}}
		dp.IPTables = &inStepRules{kernel: dp.IPTables, mirror: p.rules, writes: &p.writes, flushSets: flushSets, ensured: map[string]bool{}}
		d := newDataplane("netns, kernel "+dp.KernelVersion+", with the packet path", set, s.Proxy.SyncFailsOnError, dp, nil, k.Close)
		d.onKernel = p
		return d, nil
	}
}

// pathOnKernel is a replay's kernel and the copies of what was written.
type pathOnKernel struct {
	kernel PathKernel
	sets   *fakes.IPSets
	rules  *fakes.IPTables
	// writes counts the writes to both; verified is the count when the
	// kernel was last shown to hold the same (each look at the kernel is
	// a few processes, slow in an emulated VM).
	writes, verified int
}

// check verifies the kernel holds what was written and measures pkt with
// real connections against the tracer's answer.
func (p *pathOnKernel) check(pkt route.Packet, shares, masq route.Shares) error {
	if p.verified != p.writes {
		wantSets, err := ipvs.SaveIPSets(p.sets)
		if err != nil {
			return err
		}
		if err := p.kernel.Verify(wantSets, p.rules.SaveAll()); err != nil {
			return err
		}
		p.verified = p.writes
	}
	if err := p.kernel.CheckRoute(pkt, shares, masq); err != nil {
		return fmt.Errorf("the tracer says %s (masqueraded %s), the kernel disagrees: %w", shares, masq, err)
	}
	return nil
}

// inStepSets applies every write to the kernel's ipsets and to the copy;
// reads come from the copy, which holds the mode's own spelling (Verify
// shows the two agree). The kernel decides: a write it refuses fails.
//
// Calls that are idempotent once made (creating a set, ensuring a chain or
// a rule, all of which the proxier repeats every sync) reach the kernel
// the first time only: each is a process, slow in an emulated VM, and
// Verify would show a kernel that lost what they made.
type inStepSets struct {
	kernel  ipvs.IPSetHandle
	mirror  *fakes.IPSets
	writes  *int
	created map[string]bool
}

func (t *inStepSets) CreateSet(s ipvs.IPSet) error {
	*t.writes++
	key := s.Name + " " + string(s.Type) + " " + s.Family
	if !t.created[key] {
		if err := t.kernel.CreateSet(s); err != nil {
			return err
		}
		t.created[key] = true
	}
	return t.mirror.CreateSet(s)
}
func (t *inStepSets) Sets() ([]ipvs.IPSet, error)              { return t.mirror.Sets() }
func (t *inStepSets) ListEntries(set string) ([]string, error) { return t.mirror.ListEntries(set) }
func (t *inStepSets) AddEntry(set, entry string) error {
	*t.writes++
	if err := t.kernel.AddEntry(set, entry); err != nil {
		return err
	}
	return t.mirror.AddEntry(set, entry)
}
func (t *inStepSets) DelEntry(set, entry string) error {
	*t.writes++
	if err := t.kernel.DelEntry(set, entry); err != nil {
		return err
	}
	return t.mirror.DelEntry(set, entry)
}

// inStepRules is inStepSets for iptables.
type inStepRules struct {
	kernel interface {
		Restore(string) error
		EnsureChain(table, chain string) error
		EnsureRule(table, chain, rule string) error
		ChainExists(table, chain string) (bool, error)
	}
	mirror    *fakes.IPTables
	writes    *int
	flushSets func() error
	ensured   map[string]bool
}

func (t *inStepRules) Restore(payload string) error {
	*t.writes++
	if err := t.flushSets(); err != nil {
		return err
	}
	if err := t.kernel.Restore(payload); err != nil {
		return err
	}
	if err := t.mirror.Restore(payload); err != nil {
		return fmt.Errorf("the kernel took a restore the fake refuses: %w", err)
	}
	return nil
}
func (t *inStepRules) Save(table string) (string, error) { return t.mirror.Save(table) }
func (t *inStepRules) EnsureChain(table, chain string) error {
	*t.writes++
	if key := "chain " + table + " " + chain; !t.ensured[key] {
		if err := t.kernel.EnsureChain(table, chain); err != nil {
			return err
		}
		t.ensured[key] = true
	}
	return t.mirror.EnsureChain(table, chain)
}
func (t *inStepRules) EnsureRule(table, chain, rule string) error {
	*t.writes++
	if key := "rule " + table + " " + chain + " " + rule; !t.ensured[key] {
		if err := t.flushSets(); err != nil {
			return err
		}
		if err := t.kernel.EnsureRule(table, chain, rule); err != nil {
			return err
		}
		t.ensured[key] = true
	}
	return t.mirror.EnsureRule(table, chain, rule)
}
func (t *inStepRules) ChainExists(table, chain string) (bool, error) {
	return t.mirror.ChainExists(table, chain)
}

// WithPacketPath replays the packetPath scenarios that need no client (no
// connect, send or arp: see NeedsClient) on a kernel that holds the packet
// path (OnKernelPacketPath with open), and every other scenario with
// other.
func WithPacketPath(other scenarios.DataplaneFactory, open func(nodeIPs []string) (PathKernel, error)) scenarios.DataplaneFactory {
	path := OnKernelPacketPath(open)
	return func(s *scenarios.Scenario, clk clock.PassiveClock) (scenarios.Dataplane, error) {
		if set, ok := SettingsOf(s); ok && set.PacketPath && !NeedsClient(s) {
			return path(s, clk)
		}
		return other(s, clk)
	}
}
