// Package route is the mode-neutral vocabulary of a packet tracer: the
// first packet of a new connection, and where it ends up, each outcome with
// its exact share. A mode's tracer (sim/nftables) produces Shares; the
// scenario format's `route` expectation compares them. It knows no
// dataplane.
package route

import (
	"math/big"
	"net"
	"sort"
	"strings"
)

// Packet is the first packet of a new connection.
type Packet struct {
	Src, Dst net.IP
	DPort    int
	Protocol string // tcp, udp or sctp
}

// Verdicts a route can end in besides an endpoint.
const (
	Accept = "ACCEPT" // delivered to its original destination, unchanged
	Drop   = "DROP"
	Reject = "REJECT"
)

// Shares maps where a packet ends up ("ip:port" after DNAT, or a verdict)
// to the probability that it does; a complete trace's shares sum to 1.
type Shares map[string]*big.Rat

// Add adds w to outcome k; a zero weight adds nothing.
func (s Shares) Add(k string, w *big.Rat) {
	if w.Sign() == 0 {
		return
	}
	if s[k] == nil {
		s[k] = new(big.Rat)
	}
	s[k].Add(s[k], w)
}

// Keys lists the outcomes, sorted.
func (s Shares) Keys() []string {
	out := make([]string, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// String prints the shares sorted, each as a fraction when it is a short
// one and otherwise as a decimal with twelve places.
func (s Shares) String() string {
	var parts []string
	for _, k := range s.Keys() {
		v := s[k].RatString()
		if len(v) > 12 {
			v = s[k].FloatString(12)
		}
		parts = append(parts, k+": "+v)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// Within reports whether s and o have the same outcomes and every share of
// s is within tol of o's.
func (s Shares) Within(o Shares, tol *big.Rat) bool {
	if len(s) != len(o) {
		return false
	}
	for k, v := range s {
		w := o[k]
		if w == nil {
			return false
		}
		d := new(big.Rat).Sub(v, w)
		if d.Abs(d).Cmp(tol) > 0 {
			return false
		}
	}
	return true
}
