package netns

import (
	"strings"
	"testing"
)

const nftListA = `table ip kube-proxy {
	comment "rules for kube-proxy"
	set affinity-X {
		type ipv4_addr
		size 65535
		flags dynamic,timeout
		timeout 1m
		elements = { 10.244.9.9 timeout 1m expires 59s }
	}

	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 10.96.0.10 . tcp . 80 : goto service-A,
			     10.96.0.11 . tcp . 80 : goto service-B }
	}

	chain services {
		ip daddr . meta l4proto . th dport vmap @service-ips counter packets 3 bytes 180
		reject
	}
}
`

// The same table, listed with its blocks in another order, its elements in
// another order, no traffic in its affinity set and other counters.
const nftListB = `table ip kube-proxy {
	comment "rules for kube-proxy"
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 10.96.0.11 . tcp . 80 : goto service-B, 10.96.0.10 . tcp . 80 : goto service-A }
	}

	set affinity-X {
		type ipv4_addr
		size 65535
		flags dynamic,timeout
		timeout 1m
	}

	chain services {
		ip daddr . meta l4proto . th dport vmap @service-ips counter packets 0 bytes 0
		reject
	}
}
`

func TestCompareNFTListsNormalisesOrderElementsAndCounters(t *testing.T) {
	if err := CompareNFTLists(nftListA, nftListB); err != nil {
		t.Fatalf("the same table by meaning, yet: %v", err)
	}
	cases := map[string]struct{ from, to, want string }{
		"a missing rule":    {"\t\treject\n", "", "chain services"},
		"a changed rule":    {"\t\treject\n", "\t\tdrop\n", "chain services"},
		"an element":        {", 10.96.0.10 . tcp . 80 : goto service-A", "", "map service-ips"},
		"a set's timeout":   {"\t\ttimeout 1m\n\t}\n\n\tchain", "\t\ttimeout 2m\n\t}\n\n\tchain", "set affinity-X"},
		"the table comment": {`comment "rules for kube-proxy"`, `comment "other"`, "table"},
		"a missing chain":   {"\tchain services {", "\tchain other {", "chain other: only in the kernel"},
	}
	for name, c := range cases {
		got := strings.Replace(nftListB, c.from, c.to, 1)
		if got == nftListB {
			t.Fatalf("%s: the case changes nothing", name)
		}
		err := CompareNFTLists(nftListA, got)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want a difference naming %q, got %v", name, c.want, err)
		}
	}
}
