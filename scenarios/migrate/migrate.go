// Package migrate compares a cluster's Services under kube-proxy's current
// mode with a target mode (iptables, nftables, ipvs), from a cluster dump
// and the kube-proxy configuration, as `proxysim import` reads them: every
// node's kube-proxy is replayed in both modes on the fake dataplanes, and
// every Service port is traced from every entry point (ClusterIP, NodePort
// on each node address and on 127.0.0.1, LoadBalancer IP, external IP) and
// client place (a pod on the same node or another, the node itself, off
// the cluster) with each mode's exact tracer. Each difference is explained
// by the kube-proxy behaviour behind it, with its upstream source; the
// nodes are checked for what the target needs (kernel, nft).
//
// It compares the rules kube-proxy writes, never conntrack behaviour,
// data-plane latency or features beyond kube-proxy's rules; timing only
// when a cost profile is given (Options.Costs). The CLI (`proxysim
// migrate`) only parses flags and prints a Report.
package migrate

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	_ "github.com/proxysim/proxysim/scenarios/iptablesmode" // the modes compared
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"
	"github.com/proxysim/proxysim/scenarios/nftablesmode"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim"
)

// Modes are the modes a migration goes between.
var Modes = []string{"iptables", "ipvs", "nftables"}

// Options say what to compare.
type Options struct {
	Cluster string // a cluster dump: kubectl get nodes,svc,endpointslices,pods -A -o yaml
	Config  string // the kube-proxy configuration file or ConfigMap in use now
	To      string // the target mode
	// TargetConfig, if set, is the kube-proxy configuration the target
	// will run with (its mode must be To); otherwise the current one with
	// its mode changed, kube-proxy's defaults for the new mode applied.
	TargetConfig string
	// Set are the target's proxy settings (proxy.X=V), as sweep's --set.
	Set []scenarios.Setting
	// Nodes limits the comparison to these nodes (all by default).
	Nodes []string
	// Replay tunes each node's replay (budgets).
	Replay replay.Options
	// Costs, per mode, turn a sync's work into its duration (a cost
	// profile). With both modes' the report compares the initial sync's
	// duration on each node; without, it says timing is not compared.
	Costs map[string]sim.WorkCost
	// KernelCheck, if set, builds a real kernel's dataplane (--dataplane
	// netns, or the same inside the VM): each difference is then measured
	// on it with real connections, on each side whose mode is in
	// KernelModes (see CheckKernel).
	KernelCheck scenarios.DataplaneFactory
	// KernelModes are the modes KernelCheck replays (default
	// HostKernelModes; inside the VM, VMKernelModes).
	KernelModes []string
	// ReadFile reads the inputs (os.ReadFile by default).
	ReadFile func(string) ([]byte, error)
}

// Report is a migration's comparison.
type Report struct {
	Cluster string   `json:"cluster"`
	Config  string   `json:"config"`
	From    string   `json:"from"`
	To      string   `json:"to"`
	Set     []string `json:"set,omitempty"`
	// Nodes are the target's checks of each node.
	Nodes []NodeCheck `json:"nodes"`
	// Services lists every Service, sorted, unchanged or with its
	// differences.
	Services []ServiceReport `json:"services"`
	// Connections is how many connections were traced in each mode.
	Connections int    `json:"connections"`
	Timing      Timing `json:"timing"`
	// KernelNote says whether the differences were measured on a kernel;
	// KernelFailures counts connections the kernel did not route as
	// predicted.
	KernelNote     string   `json:"kernelCheck,omitempty"`
	KernelFailures int      `json:"kernelFailures,omitempty"`
	KernelChecked  int      `json:"kernelChecked,omitempty"`
	Warnings       []string `json:"warnings,omitempty"`
	NotCompared    []string `json:"notCompared"`
	Exit           int      `json:"exitCode"`
	Summary        string   `json:"summary"`
	sides          [2]*side // for the kernel checks
	cluster        *cluster // likewise
	probesByKey    map[string]probe
	// What the kernel check replays again.
	in             *inputs
	primaryDefault bool
	opts           Options
}

// ServiceReport is one Service: unchanged, or its differences.
type ServiceReport struct {
	Service     string       `json:"service"`
	Type        string       `json:"type"`
	Unchanged   bool         `json:"unchanged"`
	Differences []Difference `json:"differences,omitempty"`
}

// Difference is one way connections to a Service port fare differently,
// with everyone it affects.
type Difference struct {
	Port   string `json:"port"`
	Entry  string `json:"entry"`
	Client string `json:"client"`
	Before string `json:"before"`
	After  string `json:"after"`
	// BeforeShares and AfterShares are the outcomes' exact shares.
	BeforeShares map[string]string `json:"beforeShares"`
	AfterShares  map[string]string `json:"afterShares"`
	Rule         Rule              `json:"rule"`
	Affected     []Affected        `json:"affected"`
	// Kernel is what the kernel check measured, one line per connection
	// and mode (empty without one).
	Kernel []string `json:"kernel,omitempty"`

	before, after Outcome
	probes        []probe
}

// Affected is one connection a difference is about: to an address, from a
// client address, first seen by a node's rules.
type Affected struct {
	To   string `json:"to"`
	From string `json:"from"`
	Node string `json:"node"`
}

// Timing compares how long the two modes take to program the cluster.
type Timing struct {
	Compared bool         `json:"compared"`
	Note     string       `json:"note"`
	Nodes    []NodeTiming `json:"nodes,omitempty"`
}

// NodeTiming is the initial sync's duration on a node in each mode, by
// the cost profile.
type NodeTiming struct {
	Node   string        `json:"node"`
	Before time.Duration `json:"before"`
	After  time.Duration `json:"after"`
}

// Exit codes: a CI job gates a migration on them.
const (
	ExitUnchanged   = 0 // every Service fares the same, every node can run the target
	ExitDifferences = 1 // some connection fares differently
	ExitInvalid     = 2 // bad input: nothing compared
	ExitNodes       = 5 // some node cannot run the target mode (wins over 1)
	ExitKernel      = 6 // the kernel check measured a connection other than predicted (wins over all)
)

// notCompared is what the comparison leaves out, said in every report.
var notCompared = []string{
	"conntrack behaviour (established connections across the switch, timeouts, UDP entries)",
	"data-plane latency and throughput",
	"features beyond kube-proxy's rules (NetworkPolicy, a CNI's own Service handling, host firewalls)",
	"IPv6 and dual-stack Services (IPv4 only)",
	"a second connection of the same client (session affinity is compared on the first connection)",
}

// Compare replays the cluster in both modes and compares every Service.
// A bad input is an error (exit ExitInvalid) naming its file and field.
func Compare(o Options) (*Report, error) {
	if !slices.Contains(Modes, o.To) {
		return nil, fmt.Errorf("--to %q: want %s", o.To, strings.Join(Modes, ", "))
	}
	if o.Cluster == "" || o.Config == "" {
		return nil, errors.New("give the cluster dump (--cluster) and the kube-proxy configuration in use (--config)")
	}
	read := o.ReadFile
	if read == nil {
		read = os.ReadFile
	}
	in, err := readInputs(read, o.Cluster, o.Config, o.TargetConfig)
	if err != nil {
		return nil, err
	}
	// A first reading: the objects, and the configuration's mode.
	first := fmt.Sprintf("name: migrate\nproxy:\n  version: v1.36.0\n  mode: iptables\n  config: %q\nobjects:\n  - file: %q\ntimeline:\n  - at: 0s\n    note: read\n", in.config, in.cluster)
	s0, err := scenarios.Parse("migrate.yaml", []byte(first), in.fs)
	if err != nil {
		return nil, in.blame(err)
	}
	from := string(s0.Proxy.KubeProxy.Config.Mode)
	if !slices.Contains(Modes, from) {
		return nil, fmt.Errorf("%s: mode %q: proxysim compares %s", o.Config, from, strings.Join(Modes, ", "))
	}
	primaryDefault := len(s0.Proxy.KubeProxy.Config.NodePortAddresses) == 0
	if in.targetConfig != "" {
		t := fmt.Sprintf("name: migrate\nproxy:\n  version: v1.36.0\n  mode: iptables\n  config: %q\ntimeline:\n  - at: 0s\n    note: read\n", in.targetConfig)
		st, err := scenarios.Parse("migrate.yaml", []byte(t), in.fs)
		if err != nil {
			return nil, in.blame(err)
		}
		if m := string(st.Proxy.KubeProxy.Config.Mode); m != o.To {
			return nil, fmt.Errorf("%s: mode %q, but --to is %s", o.TargetConfig, m, o.To)
		}
	}
	c, err := readCluster(s0.Initial)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Cluster, err)
	}
	if len(o.Nodes) > 0 {
		var keep []*node
		for _, name := range o.Nodes {
			n := c.node(name)
			if n == nil {
				var names []string
				for _, n := range c.Nodes {
					names = append(names, n.Name)
				}
				return nil, fmt.Errorf("--node %s: no such Node in %s (nodes: %s)", name, o.Cluster, strings.Join(names, ", "))
			}
			keep = append(keep, n)
		}
		c.Nodes = keep
	}
	sides := [2]*side{{Mode: from, scenario: map[string]*scenarios.Scenario{}}, {Mode: o.To, scenario: map[string]*scenarios.Scenario{}}}
	primary := map[string]string{}
	warned := map[string]bool{}
	r := &Report{Cluster: o.Cluster, Config: o.Config, From: from, To: o.To, cluster: c, sides: sides, probesByKey: map[string]probe{},
		in: in, primaryDefault: primaryDefault && in.targetConfig == "", opts: o}
	for _, st := range o.Set {
		r.Set = append(r.Set, st.String())
	}
	shared := sharedDump(in, s0)
	for _, n := range c.Nodes {
		for i, sd := range sides {
			s, err := load(in, n, sd.Mode, i == 1, primaryDefault && in.targetConfig == "", setsFor(i, o.Set), "", shared)
			if err != nil {
				return nil, err
			}
			sd.scenario[n.Name] = s
			for _, w := range in.blame(s.Warnings).(scenarios.Problems) {
				if msg := w.Error(); !warned[msg] {
					warned[msg] = true
					r.Warnings = append(r.Warnings, msg)
				}
			}
			if set, ok := s.Proxy.Settings.(*nftablesmode.Settings); ok && set.NodePortAddresses == "primary" && len(n.IPs) > 0 {
				primary[n.Name] = n.IPs[0]
			}
		}
	}
	if err := replayAll(sides[:], c.Nodes, o.Replay); err != nil {
		return nil, err
	}
	r.compare(c, primary)
	r.Nodes = checkNodes(c.Nodes, o.To)
	r.Timing = timing(sides, c.Nodes, o.Costs)
	r.NotCompared = notCompared
	if o.KernelCheck != nil {
		if err := r.CheckKernel(o.KernelCheck, false); err != nil {
			return nil, err
		}
	}
	r.finish()
	return r, nil
}

func setsFor(i int, sets []scenarios.Setting) []scenarios.Setting {
	if i == 1 {
		return sets
	}
	return nil
}

// compare traces every probe in both modes and groups the differences.
func (r *Report) compare(c *cluster, primary map[string]string) {
	probes := c.probes()
	r.Connections = len(probes)
	bySvc := map[string]*ServiceReport{}
	for _, s := range c.Services {
		bySvc[s.Key] = &ServiceReport{Service: s.Key, Type: string(s.Svc.Spec.Type), Unchanged: true}
		if s.Svc.Spec.ClusterIP == "None" {
			bySvc[s.Key].Type = "Headless"
		}
	}
	groups := map[string]*Difference{}
	var order []string
	// The two modes trace a block of probes at once, one goroutine each
	// (a side's tracers are its own), and the block is then compared in
	// probe order: the report does not depend on which finished first.
	var outs [2][]Outcome
	for start := 0; start < len(probes); start += traceBlock {
		block := probes[start:min(start+traceBlock, len(probes))]
		var wg sync.WaitGroup
		for i, sd := range r.sides {
			outs[i] = slices.Grow(outs[i][:0], len(block))[:len(block)]
			wg.Go(func() {
				for k, p := range block {
					outs[i][k] = sd.trace(c, p)
				}
			})
		}
		wg.Wait()
		for k, p := range block {
			before, after := outs[0][k], outs[1][k]
			if before.Same(after) {
				continue
			}
			r.difference(c, primary, p, before, after, bySvc, groups, &order)
		}
	}
	for _, k := range order {
		d := groups[k]
		svc := strings.SplitN(k, "\x00", 2)[0]
		bySvc[svc].Differences = append(bySvc[svc].Differences, *d)
	}
	for _, k := range sortedKeys(bySvc) {
		r.Services = append(r.Services, *bySvc[k])
	}
}

// traceBlock is how many probes each mode traces before the two are
// compared: enough to keep both cores busy, few enough that the outcomes
// waiting for comparison stay small.
var traceBlock = 2048

// difference files a probe whose outcomes differ under its Service, with
// the others of the same port, entry, client, outcomes and rule.
func (r *Report) difference(c *cluster, primary map[string]string, p probe, before, after Outcome, bySvc map[string]*ServiceReport, groups map[string]*Difference, order *[]string) {
	owner := ""
	if n := c.nodeOf(strings.Split(p.To, ":")[0]); n != nil {
		owner = primary[n.Name]
	}
	rule := explain(p, r.From, r.To, before, after, owner)
	sr := bySvc[p.Service.Key]
	sr.Unchanged = false
	key := strings.Join([]string{p.Service.Key, p.PortName, p.Entry, p.Client, before.String(), after.String(), rule.ID}, "\x00")
	d := groups[key]
	if d == nil {
		d = &Difference{Port: p.PortName, Entry: p.Entry, Client: p.Client, Before: before.String(), After: after.String(),
			BeforeShares: shareStrings(before), AfterShares: shareStrings(after), Rule: rule, before: before, after: after}
		groups[key] = d
		*order = append(*order, key)
	}
	d.Affected = append(d.Affected, Affected{To: p.To, From: p.From, Node: p.Via})
	d.probes = append(d.probes, p)
	r.probesByKey[p.Key()] = p
}

func shareStrings(o Outcome) map[string]string {
	if o.Err != "" {
		return map[string]string{"error": o.Err}
	}
	m := map[string]string{}
	for k, v := range o.Shares {
		m[k] = ratString(v)
		if q := o.Masq[k]; q != nil && q.Sign() > 0 {
			m[k] += " masqueraded " + ratString(q)
		}
	}
	return m
}

// timing compares the initial sync's duration on each node, when a cost
// profile gives both modes' costs.
func timing(sides [2]*side, nodes []*node, costs map[string]sim.WorkCost) Timing {
	before, after := costs[sides[0].Mode], costs[sides[1].Mode]
	if before == nil || after == nil {
		var missing []string
		for _, m := range []string{sides[0].Mode, sides[1].Mode} {
			if costs[m] == nil && !slices.Contains(missing, m) {
				missing = append(missing, m)
			}
		}
		modes := " mode"
		if len(missing) > 1 {
			modes = " modes"
		}
		return Timing{Note: "timing is not compared: no cost profile for the " + strings.Join(missing, " and ") + modes + " (sim/costprofile)"}
	}
	t := Timing{Compared: true, Note: "the initial sync's duration on each node, by the cost profile (" + fmt.Sprint(before) + ", " + fmt.Sprint(after) + "); programming latency under churn is not compared"}
	for _, n := range nodes {
		a, b := sides[0].results[n.Name], sides[1].results[n.Name]
		t.Nodes = append(t.Nodes, NodeTiming{Node: n.Name, Before: before.SyncCost(a.Runs[0].Work), After: after.SyncCost(b.Runs[0].Work)})
	}
	return t
}

// finish sets the exit code and the one-line summary.
func (r *Report) finish() {
	changed, diffs := 0, 0
	for _, s := range r.Services {
		if !s.Unchanged {
			changed++
			diffs += len(s.Differences)
		}
	}
	notReady := 0
	for _, n := range r.Nodes {
		if !n.Ready {
			notReady++
		}
	}
	switch {
	case r.KernelFailures > 0:
		r.Exit = ExitKernel
	case notReady > 0:
		r.Exit = ExitNodes
	case changed > 0:
		r.Exit = ExitDifferences
	default:
		r.Exit = ExitUnchanged
	}
	r.Summary = fmt.Sprintf("%s -> %s: %d of %d Services change (%d difference(s), %d connections traced in each mode); %d of %d nodes ready for %s",
		r.From, r.To, changed, len(r.Services), diffs, r.Connections, len(r.Nodes)-notReady, len(r.Nodes), r.To)
	sort.SliceStable(r.Services, func(i, j int) bool { return r.Services[i].Service < r.Services[j].Service })
}
