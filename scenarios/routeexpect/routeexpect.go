// Package routeexpect is the `route` expectation of the scenario format,
// for any mode with a packet tracer: where a new connection ends up, each
// outcome with its exact share. A mode gives it a tracer and registers the
// expectation as one of its own; the YAML shape is the same in every mode.
package routeexpect

import (
	"maps"
	"math/big"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim/route"
)

// Tracer traces a connection through a replay's dataplane as it is now.
// With again set, it traces two connections of the same client, the second
// *again after the first, and keys each outcome "FIRST -> SECOND".
type Tracer func(r *replay.Run, pkt route.Packet, again *time.Duration) (route.Shares, error)

// MasqueradeTracer is a Tracer that also tells, for each outcome, the
// part of its share that leaves the node masqueraded (one connection).
type MasqueradeTracer func(r *replay.Run, pkt route.Packet) (shares, masqueraded route.Shares, err error)

// Route is a connection and where it must end up.
type Route struct {
	From     string              `yaml:"from"`
	To       string              `yaml:"to"`
	Protocol string              `yaml:"protocol"`
	Again    *scenarios.Duration `yaml:"again"`
	Shares   map[string]string   `yaml:"shares"`
	// Masqueraded is, for the outcomes that leave masqueraded, the part
	// of their share that does; an outcome left out keeps its source.
	Masqueraded map[string]string `yaml:"masqueraded"`
	Src         scenarios.Src

	pkt    route.Packet
	shares route.Shares
	masq   route.Shares
}

// Expect is the expectation: `route: {from, to, protocol, again, shares}`.
type Expect struct {
	Route *Route `yaml:"route"`
	Src   scenarios.Src

	tracer     Tracer
	masqTracer MasqueradeTracer
	tolerance  *big.Rat
	allowAgain bool
}

// New returns a constructor for the mode's Expectations: tolerance is how
// far a traced share may be from the expected one (0 for exact), and
// again says whether the tracer follows a second connection.
func New(t Tracer, tolerance *big.Rat, again bool) func() scenarios.Expectation {
	return func() scenarios.Expectation {
		return &Expect{tracer: t, tolerance: tolerance, allowAgain: again}
	}
}

// NewWithMasquerade is New for a tracer that tells masquerade too: the
// expectation then takes `masqueraded`. It follows one connection.
func NewWithMasquerade(t MasqueradeTracer, tolerance *big.Rat) func() scenarios.Expectation {
	return func() scenarios.Expectation {
		return &Expect{masqTracer: t, tolerance: tolerance, tracer: func(r *replay.Run, pkt route.Packet, _ *time.Duration) (route.Shares, error) {
			sh, _, err := t(r, pkt)
			return sh, err
		}}
	}
}

var verdicts = map[string]bool{route.Accept: true, route.Drop: true, route.Reject: true}

// outcomeOK checks one outcome key: an endpoint ip:port or a verdict.
func outcomeOK(k string) bool {
	if verdicts[k] {
		return true
	}
	_, _, err := net.SplitHostPort(k)
	return err == nil
}

func (e *Expect) Validate(v *scenarios.Validator) {
	rt := e.Route
	if rt == nil {
		return
	}
	rt.pkt = route.Packet{Src: net.ParseIP(rt.From)}
	if rt.pkt.Src == nil {
		v.Errorf(rt.Src.At("from"), "want an IP address, got %q", rt.From)
	}
	host, port, err := net.SplitHostPort(rt.To)
	n, perr := strconv.Atoi(port)
	if rt.pkt.Dst = net.ParseIP(host); err != nil || rt.pkt.Dst == nil || perr != nil || n < 1 || n > 65535 {
		v.Errorf(rt.Src.At("to"), "want ip:port, got %q", rt.To)
	}
	rt.pkt.DPort = n
	switch p := strings.ToUpper(rt.Protocol); p {
	case "", "TCP", "UDP", "SCTP":
		if p == "" {
			p = "TCP"
		}
		rt.pkt.Protocol = strings.ToLower(p)
	default:
		v.Errorf(rt.Src.At("protocol"), "want TCP, UDP or SCTP, got %q", rt.Protocol)
	}
	if rt.Again != nil && !e.allowAgain {
		v.Errorf(rt.Src.At("again"), "this mode's tracer follows one connection only")
	}
	if rt.Again != nil && rt.Again.D() < 0 {
		v.Errorf(rt.Src.At("again"), "must not be negative")
	}
	if len(rt.Shares) == 0 {
		v.Errorf(rt.Src.At("shares"), "required: where the connection goes, such as {10.244.1.2:8080: 1/2, 10.244.2.3:8080: 1/2} or {DROP: 1}")
		return
	}
	rt.shares = route.Shares{}
	sum := new(big.Rat)
	for _, k := range slices.Sorted(maps.Keys(rt.Shares)) {
		at := rt.Src.At("shares")
		pos := scenarios.Pos{Line: at.Line, Column: at.Column, Path: at.Path + "." + k}
		parts := []string{k}
		if rt.Again != nil {
			first, second, ok := strings.Cut(k, " -> ")
			if !ok {
				v.Errorf(pos, "with again, an outcome is a pair FIRST -> SECOND, got %q", k)
			}
			parts = []string{first, second}
		}
		for _, p := range parts {
			if !outcomeOK(p) {
				v.Errorf(pos, "want an endpoint ip:port or DROP, REJECT, ACCEPT, got %q", p)
			}
		}
		r, ok := new(big.Rat).SetString(rt.Shares[k])
		if !ok || r.Sign() <= 0 || r.Cmp(big.NewRat(1, 1)) > 0 {
			v.Errorf(pos, "want a share in (0, 1] such as 1/3 or 0.5, got %q", rt.Shares[k])
			continue
		}
		rt.shares[k] = r
		sum.Add(sum, r)
	}
	if len(rt.shares) == len(rt.Shares) && sum.Cmp(big.NewRat(1, 1)) != 0 {
		v.Errorf(rt.Src.At("shares"), "shares sum to %s, not 1", sum.RatString())
	}
	if rt.Masqueraded == nil {
		return
	}
	if e.masqTracer == nil {
		v.Errorf(rt.Src.At("masqueraded"), "this mode's tracer does not tell masquerade")
		return
	}
	rt.masq = route.Shares{}
	for _, k := range slices.Sorted(maps.Keys(rt.Masqueraded)) {
		at := rt.Src.At("masqueraded")
		pos := scenarios.Pos{Line: at.Line, Column: at.Column, Path: at.Path + "." + k}
		r, ok := new(big.Rat).SetString(rt.Masqueraded[k])
		switch {
		case rt.shares[k] == nil:
			v.Errorf(pos, "%q is not one of the shares' outcomes", k)
		case !ok || r.Sign() <= 0 || r.Cmp(rt.shares[k]) > 0:
			v.Errorf(pos, "want a share in (0, %s] (the outcome's), got %q", rt.shares[k].RatString(), rt.Masqueraded[k])
		default:
			rt.masq[k] = r
		}
	}
}

func (e *Expect) Check(r *replay.Run) {
	rt := e.Route
	if rt == nil {
		return
	}
	var again *time.Duration
	if rt.Again != nil {
		d := rt.Again.D()
		again = &d
	}
	var got, masq route.Shares
	var err error
	if e.masqTracer != nil {
		got, masq, err = e.masqTracer(r, rt.pkt)
	} else {
		got, err = e.tracer(r, rt.pkt, again)
	}
	if err != nil {
		r.Fail(e.Src.At("route"), "route", rt.shares.String(), "error: "+err.Error())
		return
	}
	tol := e.tolerance
	if tol == nil {
		tol = new(big.Rat)
	}
	if !got.Within(rt.shares, tol) {
		r.Fail(e.Src.At("route"), "route", rt.shares.String(), got.String())
		return
	}
	if rt.masq != nil && !masq.Within(rt.masq, tol) {
		r.Fail(rt.Src.At("masqueraded"), "route.masqueraded", rt.masq.String(), masq.String())
	}
}
