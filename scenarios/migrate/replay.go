package migrate

import (
	"errors"
	"fmt"
	"math/big"
	"net"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing/fstest"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim/route"
	"github.com/proxysim/proxysim/sim/trace"
)

// masqueradeTracer is what each mode's dataplane offers the comparison: a
// new connection's outcomes with their exact shares, and the part of each
// that leaves masqueraded (iptablesmode, nftablesmode and ipvsmode's
// RouteMasquerade).
type masqueradeTracer interface {
	RouteMasquerade(pkt route.Packet) (route.Shares, route.Shares, error)
}

// frozenTracer is the same over a dataplane that no longer changes, with
// what it reads indexed once: what a comparison of a large cluster needs.
type frozenTracer interface {
	FrozenTracer() (func(route.Packet) (route.Shares, route.Shares, error), error)
}

type tracerFunc func(route.Packet) (route.Shares, route.Shares, error)

func (f tracerFunc) RouteMasquerade(pkt route.Packet) (route.Shares, route.Shares, error) {
	return f(pkt)
}

// inputs are the files a replay reads, held in memory under the names the
// generated scenarios use; names maps those back to the user's paths for
// messages.
type inputs struct {
	fs    fstest.MapFS
	names map[string]string
	// cluster and config are the names the scenarios use.
	cluster, config, targetConfig string
}

func readInputs(read func(string) ([]byte, error), cluster, config, targetConfig string) (*inputs, error) {
	in := &inputs{fs: fstest.MapFS{}, names: map[string]string{}}
	var errs []error
	add := func(path, fallback string) string {
		if path == "" {
			return ""
		}
		name := filepath.Base(path)
		if _, taken := in.names[name]; taken || !strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml") && !strings.HasSuffix(name, ".json") {
			name = fallback
		}
		data, err := read(path)
		if err != nil {
			errs = append(errs, err)
			return ""
		}
		in.fs[name] = &fstest.MapFile{Data: data, Mode: 0o644}
		in.names[name] = path
		return name
	}
	in.cluster = add(cluster, "cluster.yaml")
	in.config = add(config, "kube-proxy.yaml")
	in.targetConfig = add(targetConfig, "kube-proxy-target.yaml")
	return in, errors.Join(errs...)
}

// blame rewrites problems in the in-memory files to name the user's files.
func (in *inputs) blame(err error) error {
	var ps scenarios.Problems
	if !errors.As(err, &ps) {
		return err
	}
	out := make(scenarios.Problems, len(ps))
	for i, p := range ps {
		if real, ok := in.names[p.File]; ok {
			p.File = real
		}
		out[i] = p
	}
	return out
}

// side is one mode's view of the cluster: how each node's kube-proxy is
// configured, and its dataplane after the initial sync.
type side struct {
	Mode       string
	dataplanes map[string]scenarios.Dataplane // by node: the replays' own
	scenario   map[string]*scenarios.Scenario // by node
	tracer     map[string]masqueradeTracer
	results    map[string]*replay.Result
	warnings   scenarios.Problems
}

// scenarioText is the scenario that replays one node's kube-proxy in a
// mode: the dump, the configuration file, the node's name and addresses,
// and, for the target, the mode with kube-proxy's defaults for it.
func scenarioText(in *inputs, n *node, mode string, target bool, primaryDefault bool, steps string, withObjects bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\n", strconv.Quote("migrate "+n.Name+" "+mode))
	b.WriteString("proxy:\n  version: v1.36.0\n")
	cfg := in.config
	if target && in.targetConfig != "" {
		cfg = in.targetConfig
	}
	fmt.Fprintf(&b, "  config: %s\n", strconv.Quote(cfg))
	if target && in.targetConfig == "" {
		fmt.Fprintf(&b, "  mode: %s\n", mode)
	}
	fmt.Fprintf(&b, "  nodeName: %s\n", strconv.Quote(n.Name))
	if len(n.IPs) > 0 {
		fmt.Fprintf(&b, "  nodeIPs: [%s]\n", strings.Join(n.IPs, ", "))
	}
	switch mode {
	case "ipvs":
		b.WriteString("  packetPath: true\n")
	case "nftables":
		// kube-proxy defaults --nodeport-addresses to primary in this
		// mode when the configuration gives none
		// (cmd/kube-proxy/app/server_linux.go platformApplyDefaults).
		if target && primaryDefault && len(n.IPs) > 0 {
			b.WriteString("  nodePortAddresses: primary\n")
		}
	}
	if withObjects {
		fmt.Fprintf(&b, "objects:\n  - file: %s\n", strconv.Quote(in.cluster))
	}
	b.WriteString("timeline:\n  - at: 1s\n    note: the dataplane after the initial sync\n")
	b.WriteString(steps)
	return b.String()
}

// dump is the cluster dump decoded once, for every node's scenario in both
// modes: decoding does not depend on the mode, and a replay copies the
// objects it stores, so the scenarios can share them.
type dump struct {
	objects []scenarios.Object
	// warnings are the dump's own (objects skipped), in the order a
	// scenario naming the dump would add them after its other warnings.
	warnings scenarios.Problems
}

// sharedDump keeps the objects and warnings of a scenario that named the
// dump (in.cluster).
func sharedDump(in *inputs, s *scenarios.Scenario) *dump {
	d := &dump{objects: s.Initial}
	for _, w := range s.Warnings {
		if w.File == in.cluster {
			d.warnings = append(d.warnings, w)
		}
	}
	return d
}

// load parses one node's scenario in a mode, with the target's settings.
// With shared, the scenario takes the dump's objects as decoded once
// instead of decoding the file again.
func load(in *inputs, n *node, mode string, target, primaryDefault bool, sets []scenarios.Setting, steps string, shared *dump) (*scenarios.Scenario, error) {
	text := scenarioText(in, n, mode, target, primaryDefault, steps, shared == nil)
	name := "migrate-" + n.Name + "-" + mode + ".yaml"
	s, err := scenarios.Parse(name, []byte(text), in.fs)
	if err != nil {
		return nil, in.blame(err)
	}
	if len(sets) > 0 {
		if s, err = s.WithSettings(sets); err != nil {
			var se *scenarios.SettingError
			if errors.As(err, &se) {
				return nil, fmt.Errorf("%s: %s", se.Names("--set "), se.Reason())
			}
			return nil, in.blame(err)
		}
	}
	if shared != nil {
		s.Initial = shared.objects
		s.Warnings = append(s.Warnings[:len(s.Warnings):len(s.Warnings)], shared.warnings...)
	}
	return s, nil
}

// replayAll replays every node's scenario of both sides, a few at once,
// and keeps each dataplane for tracing.
func replayAll(sides []*side, nodes []*node, opts replay.Options) error {
	type job struct {
		sd *side
		n  *node
	}
	var jobs []job
	for _, sd := range sides {
		sd.tracer = map[string]masqueradeTracer{}
		sd.results = map[string]*replay.Result{}
		sd.dataplanes = map[string]scenarios.Dataplane{}
		for _, n := range nodes {
			jobs = append(jobs, job{sd, n})
		}
	}
	errs := make([]error, len(jobs))
	tracers := make([]masqueradeTracer, len(jobs))
	dps := make([]scenarios.Dataplane, len(jobs))
	results := make([]*replay.Result, len(jobs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range max(1, min(runtime.GOMAXPROCS(0), len(jobs))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				tracers[i], dps[i], results[i], errs[i] = replayOne(jobs[i].sd.scenario[jobs[i].n.Name], opts)
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, j := range jobs {
		if errs[i] != nil {
			return fmt.Errorf("node %s in mode %s: %w", j.n.Name, j.sd.Mode, errs[i])
		}
		j.sd.tracer[j.n.Name] = tracers[i]
		j.sd.dataplanes[j.n.Name] = dps[i]
		j.sd.results[j.n.Name] = results[i]
	}
	return nil
}

func replayOne(s *scenarios.Scenario, opts replay.Options) (masqueradeTracer, scenarios.Dataplane, *replay.Result, error) {
	var dp scenarios.Dataplane
	opts.Follow = func(_ trace.Event, d scenarios.Dataplane) { dp = d }
	if opts.TraceKeep == 0 {
		opts.TraceKeep = 64
	}
	res, err := replay.Replay(s, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	if !res.Passed() {
		return nil, nil, nil, fmt.Errorf("the replay failed: %s", res.Failures[0].What)
	}
	if len(res.Runs) == 0 || res.Runs[0].Err != "" {
		return nil, nil, nil, fmt.Errorf("the proxy's initial sync did not succeed")
	}
	if ft, ok := dp.(frozenTracer); ok {
		f, err := ft.FrozenTracer()
		if err != nil {
			return nil, nil, nil, err
		}
		return tracerFunc(f), dp, res, nil
	}
	t, ok := dp.(masqueradeTracer)
	if !ok {
		return nil, nil, nil, fmt.Errorf("mode %s has no packet tracer that tells masquerade", s.Proxy.Mode)
	}
	return t, dp, res, nil
}

// dataplane is a node's replayed dataplane, traced by its mode's own
// (unindexed) tracer.
func (sd *side) dataplane(node string) (masqueradeTracer, error) {
	t, ok := sd.dataplanes[node].(masqueradeTracer)
	if !ok {
		return nil, fmt.Errorf("mode %s has no packet tracer that tells masquerade", sd.Mode)
	}
	return t, nil
}

// Outcome is where one connection ends up in one mode: each outcome (an
// endpoint ip:port, or ACCEPT, DROP, REJECT) with its exact share, and the
// part of each share that leaves masqueraded.
type Outcome struct {
	Shares route.Shares
	Masq   route.Shares
	Err    string
}

// trace follows a probe in one mode: on the node it starts at, then, when
// that node lets it go unchanged to another node's address, on that node.
func (sd *side) trace(c *cluster, p probe) Outcome {
	pkt, err := packet(p)
	if err != nil {
		return Outcome{Err: err.Error()}
	}
	sh, masq, err := sd.tracer[p.Via].RouteMasquerade(pkt)
	if err != nil {
		return Outcome{Err: err.Error()}
	}
	out := Outcome{Shares: route.Shares{}, Masq: route.Shares{}}
	for _, k := range sh.Keys() {
		w := sh[k]
		next := c.nodeOf(pkt.Dst.String())
		if k != route.Accept || next == nil || next.Name == p.Via {
			out.Shares.Add(k, w)
			if m := masq[k]; m != nil {
				out.Masq.Add(k, m)
			}
			continue
		}
		sh2, masq2, err := sd.tracer[next.Name].RouteMasquerade(pkt)
		if err != nil {
			return Outcome{Err: err.Error()}
		}
		for _, k2 := range sh2.Keys() {
			out.Shares.Add(k2, new(big.Rat).Mul(w, sh2[k2]))
			if m := masq2[k2]; m != nil {
				out.Masq.Add(k2, new(big.Rat).Mul(w, m))
			}
		}
	}
	return out
}

func packet(p probe) (route.Packet, error) {
	host, port, err := net.SplitHostPort(p.To)
	if err != nil {
		return route.Packet{}, err
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return route.Packet{}, err
	}
	return route.Packet{Src: net.ParseIP(p.From), Dst: net.ParseIP(host), DPort: n, Protocol: p.Protocol}, nil
}

// tolerance is how far two shares may be apart and still be the same:
// the iptables mode's probabilities are decimals kube-proxy printed with
// ten places (0.3333333333, not 1/3).
var tolerance = big.NewRat(1, 1_000_000)

// Same reports whether two outcomes are the same connection fate.
func (o Outcome) Same(p Outcome) bool {
	if o.Err != "" || p.Err != "" {
		return o.Err == p.Err
	}
	if !o.Shares.Within(p.Shares, tolerance) {
		return false
	}
	for _, k := range o.Shares.Keys() {
		a, b := o.Masq[k], p.Masq[k]
		if a == nil {
			a = new(big.Rat)
		}
		if b == nil {
			b = new(big.Rat)
		}
		d := new(big.Rat).Sub(a, b)
		if d.Abs(d).Cmp(tolerance) > 0 {
			return false
		}
	}
	return true
}

// answers reports whether the Service answers at all: some share reaches
// an endpoint.
func (o Outcome) answers() bool {
	for k := range o.Shares {
		if _, _, err := net.SplitHostPort(k); err == nil {
			return true
		}
	}
	return false
}

// masqueradedShare is the share of the connection that leaves
// masqueraded.
func (o Outcome) masqueradedShare() *big.Rat {
	sum := new(big.Rat)
	for _, v := range o.Masq {
		sum.Add(sum, v)
	}
	return sum
}

// String renders an outcome for people: "10.244.1.5:8080 1/2 (masqueraded),
// 10.244.2.7:8080 1/2", "DROP", "no Service rule takes it (ACCEPT)".
func (o Outcome) String() string {
	if o.Err != "" {
		return "error: " + o.Err
	}
	var parts []string
	for _, k := range o.Shares.Keys() {
		w := o.Shares[k]
		name := k
		switch k {
		case route.Accept:
			name = "no Service rule takes it (ACCEPT: on to the address unchanged)"
		case route.Drop:
			name = "dropped (DROP: no answer)"
		case route.Reject:
			name = "rejected (REJECT)"
		}
		s := name
		if len(o.Shares) > 1 {
			s += " " + ratString(w)
		}
		if m := o.Masq[k]; m != nil && m.Sign() > 0 {
			if m.Cmp(w) == 0 {
				s += " (masqueraded)"
			} else {
				s += " (" + ratString(m) + " masqueraded)"
			}
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// ratString prints a share as a short fraction, or a decimal when the
// fraction is long (an iptables probability's).
func ratString(r *big.Rat) string {
	if s := r.RatString(); len(s) <= 9 {
		return s
	}
	// A decimal within the comparison's tolerance of a short fraction
	// (0.3333333333) reads as that fraction, marked approximate.
	for d := int64(2); d <= 64; d++ {
		n := new(big.Rat).Mul(r, big.NewRat(d, 1))
		f, _ := n.Float64()
		q := big.NewRat(int64(f+0.5), d)
		if diff := new(big.Rat).Sub(r, q); diff.Abs(diff).Cmp(tolerance) <= 0 {
			return "~" + q.RatString()
		}
	}
	return strings.TrimRight(strings.TrimRight(r.FloatString(6), "0"), ".")
}
