package netns

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"
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

// Verify lists the kernel's table and the fake's dump loaded elsewhere
// through the same nft: a table that means the dump agrees, whatever its
// history; one rule changed (the same number of rules) does not.
func TestNFTablesVerifyComparesWithTheKernelsWords(t *testing.T) {
	if !Privileged() {
		t.Skip("needs root to create a namespace")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("no nft")
	}
	d, err := OpenNFTablesDataplane([]string{"192.168.0.2"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Verify(""); err != nil {
		t.Fatalf("no table and an empty dump: %v", err)
	}
	// Built in two transactions, the chain after the set, in kube-proxy's
	// spelling; the dump creates them in one, in another order.
	tx := d.NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Add(&knftables.Set{Name: "cluster-ips", Type: "ipv4_addr"})
	tx.Add(&knftables.Element{Set: "cluster-ips", Key: []string{"10.96.0.11"}})
	tx.Add(&knftables.Element{Set: "cluster-ips", Key: []string{"10.96.0.10"}})
	if err := d.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	tx = d.NewTransaction()
	tx.Add(&knftables.Chain{Name: "masquerading"})
	tx.Add(&knftables.Rule{Chain: "masquerading", Rule: "mark and 0x00004000 != 0 mark set mark xor 0x00004000 masquerade fully-random"})
	if err := d.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	dump := `add table ip kube-proxy
add chain ip kube-proxy masquerading
add set ip kube-proxy cluster-ips { type ipv4_addr ; }
add rule ip kube-proxy masquerading mark and 0x00004000 != 0 mark set mark xor 0x00004000 masquerade fully-random
add element ip kube-proxy cluster-ips { 10.96.0.10 }
add element ip kube-proxy cluster-ips { 10.96.0.11 }
`
	if err := d.Verify(dump); err != nil {
		t.Fatalf("the same table by meaning: %v", err)
	}
	changed := strings.Replace(dump, "masquerade fully-random", "masquerade", 1)
	if err := d.Verify(changed); err == nil || !strings.Contains(err.Error(), "chain masquerading") {
		t.Fatalf("a changed rule must be found: %v", err)
	}
	if err := d.Verify(strings.Replace(dump, "{ 10.96.0.11 }", "{ 10.96.0.12 }", 1)); err == nil || !strings.Contains(err.Error(), "set cluster-ips") {
		t.Fatalf("a changed element must be found: %v", err)
	}
}
