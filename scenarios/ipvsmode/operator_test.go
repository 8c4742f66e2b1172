package ipvsmode_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/scenarios"
)

// Bad uses of the operator's vocabulary are refused at load, at the field.
func TestOperatorVocabularyRefusesBadInput(t *testing.T) {
	const head = "name: x\nproxy: {version: v1.36.3}\ntimeline:\n  - {at: 1s, connect: {name: c1, client: 10.0.0.5:1000, service: 10.96.0.10:80}}\n"
	cases := []struct{ name, yaml, want string }{
		{"an unknown node sysctl", "name: x\nproxy: {version: v1.36.3, sysctls: {net/ipv4/vs/nope: 1}}\ntimeline: [{at: 1s, note: n}]\n",
			"x.yaml:2:36: proxy.sysctls.net/ipv4/vs/nope: unknown sysctl"},
		{"a negative sysctl step", head + "  - {at: 2s, sysctls: {net/ipv4/vs/conntrack: -1}}\n",
			"x.yaml:5:23: timeline[1].sysctls.net/ipv4/vs/conntrack: must not be negative"},
		{"two ipvsadm commands in one step", head + "  - {at: 2s, ipvs: {flush: true, delete: true}}\n",
			"x.yaml:5:20: timeline[1].ipvs: say one thing to do"},
		{"an ipvs service without its protocol", head + "  - {at: 2s, ipvs: {service: 10.96.0.10:80, server: 10.244.1.2:8080, weight: 0}}\n",
			"x.yaml:5:30: timeline[1].ipvs.service: want PROTOCOL IP:PORT"},
		{"a flush that names a server", head + "  - {at: 2s, ipvs: {flush: true, server: 10.244.1.2:8080}}\n",
			"x.yaml:5:28: timeline[1].ipvs.flush: flush clears the whole table"},
		{"a send on no connection", head + "  - {at: 2s, send: {conn: c9}}\n",
			"x.yaml:5:27: timeline[1].send.conn: no open connection named \"c9\""},
		{"a reset of a closed connection", head + "  - {at: 2s, close: {name: c1}}\n  - {at: 3s, reset: {conn: c1}}\n",
			"x.yaml:6:28: timeline[2].reset.conn: no open connection named \"c1\""},
		{"an unknown send outcome", head + "  - {at: 2s, expect: {sends: {c1: lost}}}\n",
			"x.yaml:5:30: timeline[1].expect.sends.c1: want delivered, dropped or reset"},
		{"an ARP question about no address", head + "  - {at: 2s, expect: {arp: {web: answered}}}\n",
			"x.yaml:5:28: timeline[1].expect.arp.web: \"web\" is not an IP address"},
		{"an expiry window upside down", head + "  - {at: 2s, expect: {connExpiry: {c1: {atLeast: 5s, atMost: 1s}}}}\n",
			"x.yaml:5:62: timeline[1].expect.connExpiry.c1.atMost: atMost 1s is below atLeast 5s"},
		{"timeouts with nothing to check", head + "  - {at: 2s, expect: {timeouts: {}}}\n",
			"x.yaml:5:33: timeline[1].expect.timeouts: say what to expect"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := scenarios.Parse("x.yaml", []byte(c.yaml), nil)
			var ps scenarios.Problems
			if !errors.As(err, &ps) {
				t.Fatalf("Parse = %v; want problems", err)
			}
			if !strings.HasPrefix(ps[0].Error(), c.want) {
				t.Fatalf("first problem:\n got  %s\n want %s...\nall:\n%s", ps[0].Error(), c.want, ps.Error())
			}
		})
	}
}
