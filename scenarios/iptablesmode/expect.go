package iptablesmode

import (
	"fmt"
	"maps"
	"math/big"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim/iptables"
)

// tableExpect is the iptables golden: iptables-save of filter and nat,
// inline or in a file.
type tableExpect struct {
	IPTables     *string `yaml:"iptables"`
	IPTablesFile string  `yaml:"iptablesFile"`
	Src          scenarios.Src
}

func (e *tableExpect) golden() scenarios.Golden {
	return scenarios.Golden{Key: "iptables", FileKey: "iptablesFile", Inline: e.IPTables, File: e.IPTablesFile, Src: e.Src}
}

func (e *tableExpect) Validate(v *scenarios.Validator) { e.golden().Validate(v) }
func (e *tableExpect) Check(r *scenarios.Run)          { e.golden().Check(r) }

// Route is a new connection and where it must end up: each outcome (an
// endpoint "ip:port", or DROP, REJECT, ACCEPT) with its share, a fraction
// ("1/3") or a decimal ("0.25").
type Route struct {
	From     string            `yaml:"from"`
	To       string            `yaml:"to"`
	Protocol string            `yaml:"protocol"`
	Shares   map[string]string `yaml:"shares"`
	Src      scenarios.Src

	pkt    iptables.Packet
	shares map[string]*big.Rat
}

// routeExpect checks a route with the tracer.
type routeExpect struct {
	Route *Route `yaml:"route"`
	Src   scenarios.Src
}

// shareTolerance is how far a traced share may be from the expected one:
// kube-proxy prints probabilities with ten decimals, so 1/3 is written
// 0.3333333333 and the exact share of a path differs from 1/n by up to
// about 1e-10 per probabilistic rule on it.
var shareTolerance = big.NewRat(1, 1_000_000_000)

var verdicts = map[string]bool{iptables.VerdictAccept: true, iptables.VerdictDrop: true, iptables.VerdictReject: true}

func (e *routeExpect) Validate(v *scenarios.Validator) {
	rt := e.Route
	if rt == nil {
		return
	}
	rt.pkt = validatePacket(v, rt.Src, rt.From, rt.To, rt.Protocol)
	if len(rt.Shares) == 0 {
		v.Errorf(rt.Src.At("shares"), "required: where the connection goes, such as {10.244.1.2:8080: 1/2, 10.244.2.3:8080: 1/2} or {DROP: 1}")
		return
	}
	rt.shares = map[string]*big.Rat{}
	sum := new(big.Rat)
	for _, k := range slices.Sorted(maps.Keys(rt.Shares)) {
		at := rt.Src.At("shares")
		pos := scenarios.Pos{Line: at.Line, Column: at.Column, Path: at.Path + "." + k}
		if !verdicts[k] {
			if _, _, err := net.SplitHostPort(k); err != nil {
				v.Errorf(pos, "want an endpoint ip:port or DROP, REJECT, ACCEPT, got %q", k)
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
}

// validatePacket checks a connection's from, to and protocol fields.
func validatePacket(v *scenarios.Validator, src scenarios.Src, from, to, protocol string) iptables.Packet {
	pkt := iptables.Packet{Src: net.ParseIP(from)}
	if pkt.Src == nil {
		v.Errorf(src.At("from"), "want an IP address, got %q", from)
	}
	host, port, err := net.SplitHostPort(to)
	n, perr := strconv.Atoi(port)
	if pkt.Dst = net.ParseIP(host); err != nil || pkt.Dst == nil || perr != nil || n < 1 || n > 65535 {
		v.Errorf(src.At("to"), "want ip:port, got %q", to)
	}
	pkt.DPort = n
	switch strings.ToUpper(protocol) {
	case "", "TCP":
		pkt.Protocol = "tcp"
	case "UDP", "SCTP":
		pkt.Protocol = strings.ToLower(protocol)
	default:
		v.Errorf(src.At("protocol"), "want TCP, UDP or SCTP, got %q", protocol)
	}
	return pkt
}

func (e *routeExpect) Check(r *scenarios.Run) {
	rt := e.Route
	if rt == nil {
		return
	}
	got, _, err := dataplaneOf(r).Route(rt.pkt)
	if err != nil {
		r.Fail(e.Src.At("route"), "route", formatShares(rt.shares), "error: "+err.Error())
		return
	}
	same := len(got) == len(rt.shares)
	for k, want := range rt.shares {
		g := got[k]
		if g == nil {
			same = false
			break
		}
		diff := new(big.Rat).Sub(g, want)
		if diff.Abs(diff).Cmp(shareTolerance) > 0 {
			same = false
		}
	}
	if !same {
		r.Fail(e.Src.At("route"), "route", formatShares(rt.shares), formatShares(got))
	}
}

// formatShares prints shares sorted, each as a fraction when it is a
// short one and otherwise as a decimal with twelve places.
func formatShares(s map[string]*big.Rat) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s)) {
		v := s[k].RatString()
		if len(v) > 12 {
			v = s[k].FloatString(12)
		}
		parts = append(parts, k+": "+v)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// restoreFault makes the next N restores fail: `fault: {restoreFailures: N}`.
type restoreFault struct {
	RestoreFailures int `yaml:"restoreFailures"`
	Src             scenarios.Src
}

func (f *restoreFault) Validate(v *scenarios.Validator) {
	if f.RestoreFailures < 0 {
		v.Errorf(f.Src.At("restoreFailures"), "must not be negative")
	} else if f.RestoreFailures == 0 {
		// A fault of no restores would inject nothing: a typo, not a story.
		v.Errorf(f.Src.At("restoreFailures"), "want at least 1 failing restore (or leave restoreFailures out)")
	}
}

func (f *restoreFault) Do(r *scenarios.Run) error {
	if n := f.RestoreFailures; n > 0 {
		r.Step("fault", "", fmt.Sprintf("next %d restores fail", n))
		dataplaneOf(r).faults.FailNext(n)
	}
	return nil
}
