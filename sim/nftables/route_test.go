package nftables

import (
	"context"
	"net"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/proxysim/proxysim/sim/route"
)

// tableWith is a kube-proxy table with one prerouting nat chain holding
// the given rules.
func tableWith(t *testing.T, rules ...string) *knftables.FakeTable {
	t.Helper()
	nft := knftables.NewFake(knftables.IPv4Family, Table)
	tx := nft.NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Add(&knftables.Chain{Name: "pre", Type: knftables.PtrTo(knftables.NATType), Hook: knftables.PtrTo(knftables.PreroutingHook), Priority: knftables.PtrTo(knftables.DNATPriority)})
	tx.Add(&knftables.Chain{Name: "second"})
	tx.Add(&knftables.Rule{Chain: "second", Rule: "dnat to 10.1.0.2:80"})
	for _, r := range rules {
		tx.Add(&knftables.Rule{Chain: "pre", Rule: r})
	}
	if err := nft.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	return nft.Table
}

func traceOf(t *testing.T, tbl *knftables.FakeTable) (string, error) {
	sh, err := Route(tbl, []net.IP{node}, route.Packet{Src: outside, Dst: vip, DPort: 80, Protocol: "tcp"})
	return sh.String(), err
}

// The tracer refuses what it does not understand, naming the rule, rather
// than guessing.
func TestTracerRefusesUnknownExpressions(t *testing.T) {
	for _, r := range []string{"tcp dport 80 accept", "ip saddr . ip daddr 1.2.3.4 drop", "meta iifname eth0 drop", "mark set 0x1", "numgen inc mod 2 vmap { 0 : drop , 1 : drop }"} {
		_, err := traceOf(t, tableWith(t, r))
		if err == nil || !strings.Contains(err.Error(), r) {
			t.Errorf("%q: want an error naming the rule, got %v", r, err)
		}
	}
}

// numgen splits exactly, goto does not come back, jump does, a missing
// number falls through the rule, and prefixes and negation match as nft
// matches them.
func TestTracerSemantics(t *testing.T) {
	for _, c := range []struct {
		rules []string
		want  string
	}{
		{[]string{"numgen random mod 4 vmap { 0 : goto second , 1 : drop , 2 : goto second }"}, "{10.1.0.2:80: 1/2, ACCEPT: 1/4, DROP: 1/4}"},
		{[]string{"meta l4proto tcp dnat ip addr . port to numgen random mod 3 map { 0 : 10.9.0.1 . 8080 , 2 : 10.9.0.3 . 8080 }", "drop"}, "{10.9.0.1:8080: 1/3, 10.9.0.3:8080: 1/3, DROP: 1/3}"},
		{[]string{"ip saddr 203.0.113.0/24 jump second"}, "{10.1.0.2:80: 1}"},
		{[]string{"ip saddr != 203.0.113.0/24 jump second", "reject"}, "{REJECT: 1}"},
		{[]string{"ip daddr { 10.0.0.0/8 , 192.168.0.0/16 } mark set mark or 0x4000", "mark and 0x4000 != 0 drop"}, "{DROP: 1}"},
		{[]string{"fib daddr type local drop"}, "{ACCEPT: 1}"},
		{[]string{"meta l4proto udp drop", "th dport 80 goto second", "drop"}, "{10.1.0.2:80: 1}"},
	} {
		got, err := traceOf(t, tableWith(t, c.rules...))
		if err != nil || got != c.want {
			t.Errorf("%q: got %s, %v; want %s", c.rules, got, err, c.want)
		}
	}
}
