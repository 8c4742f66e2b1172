package fakes_test

import (
	"net"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/sim/ipvs"
)

// The fake refuses what the ipset tool refuses, and matches members as
// the kernel's set types do.
func TestIPSetsRefuseAndMatch(t *testing.T) {
	f := fakes.NewIPSets()
	ipport := ipvs.IPSet{Name: "KUBE-CLUSTER-IP", Type: ipvs.HashIPPort, Family: "inet"}
	cidr := ipvs.IPSet{Name: "KUBE-LOAD-BALANCER-SOURCE-CIDR", Type: ipvs.HashIPPortNet, Family: "inet"}
	for _, s := range []ipvs.IPSet{ipport, cidr} {
		if err := f.CreateSet(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.CreateSet(ipvs.IPSet{Name: "KUBE-CLUSTER-IP", Type: ipvs.HashIP, Family: "inet"}); err == nil {
		t.Error("re-creating a set with another type succeeded")
	}
	for _, bad := range []string{"10.96.0.1", "10.96.0.1,tcp:99999", "fd00::1,tcp:80", "10.96.0.1,icmp:80", "10.96.0.1,tcp:80,1.2.3.4"} {
		if err := f.AddEntry("KUBE-CLUSTER-IP", bad); err == nil {
			t.Errorf("AddEntry(%q) succeeded", bad)
		}
	}
	if err := f.AddEntry("KUBE-CLUSTER-IP", "10.96.0.1,tcp:443"); err != nil {
		t.Fatal(err)
	}
	if err := f.AddEntry("KUBE-LOAD-BALANCER-SOURCE-CIDR", "203.0.113.10,tcp:80,198.51.100.7/24"); err != nil {
		t.Fatal(err)
	}
	if err := f.DelEntry("KUBE-CLUSTER-IP", "10.96.0.2,tcp:443"); err == nil {
		t.Error("deleting a missing entry succeeded")
	}
	sets, err := ipvs.ReadIPSets(f)
	if err != nil {
		t.Fatal(err)
	}
	if e := sets["KUBE-LOAD-BALANCER-SOURCE-CIDR"].Entries; strings.Join(e, " ") != "203.0.113.10,tcp:80,198.51.100.0/24" {
		t.Errorf("stored %v, want the network in canonical form", e)
	}
	ip := net.ParseIP
	for _, tc := range []struct {
		set, flags string
		src, dst   string
		proto      string
		port       int
		want       bool
	}{
		{"KUBE-CLUSTER-IP", "dst,dst", "10.244.1.5", "10.96.0.1", "tcp", 443, true},
		{"KUBE-CLUSTER-IP", "dst,dst", "10.244.1.5", "10.96.0.1", "udp", 443, false},
		{"KUBE-CLUSTER-IP", "dst,dst", "10.244.1.5", "10.96.0.1", "tcp", 80, false},
		{"KUBE-CLUSTER-IP", "src,dst", "10.96.0.1", "10.96.0.9", "tcp", 443, true},
		{"KUBE-LOAD-BALANCER-SOURCE-CIDR", "dst,dst,src", "198.51.100.200", "203.0.113.10", "tcp", 80, true},
		{"KUBE-LOAD-BALANCER-SOURCE-CIDR", "dst,dst,src", "198.51.101.1", "203.0.113.10", "tcp", 80, false},
	} {
		got, err := sets[tc.set].Match(tc.flags, ip(tc.src), ip(tc.dst), tc.proto, tc.port)
		if err != nil || got != tc.want {
			t.Errorf("%s %s %s->%s %s/%d: %v, %v; want %v", tc.set, tc.flags, tc.src, tc.dst, tc.proto, tc.port, got, err, tc.want)
		}
	}
}
