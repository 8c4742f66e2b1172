package netns

import (
	"strings"
	"testing"

	"github.com/proxysim/proxysim/sim/ipvs"
)

// The kernel's ipsets, written in one batch, read back as the IPVS mode
// spells them (ipvs.SaveIPSets), kube-proxy's set types all there; a
// write the kernel refuses fails the batch.
func TestIPSetsRoundTrip(t *testing.T) {
	if !Privileged() {
		t.Skip("needs root to create a namespace")
	}
	if _, err := LookIPSet(); err != nil {
		t.Skip(err)
	}
	ns := New(t, "ipset")
	s, err := ns.IPSets()
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []ipvs.IPSet{
		{Name: "KUBE-CLUSTER-IP", Type: ipvs.HashIPPort, Family: "inet"},
		{Name: "KUBE-IPVS-IPS", Type: ipvs.HashIP, Family: "inet"},
		{Name: "KUBE-LOAD-BALANCER-SOURCE-CIDR", Type: ipvs.HashIPPortNet, Family: "inet"},
		{Name: "KUBE-LOOP-BACK", Type: ipvs.HashIPPortIP, Family: "inet"},
		{Name: "KUBE-NODE-PORT-TCP", Type: ipvs.BitmapPort},
	} {
		if err := s.CreateSet(set); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range [][2]string{
		{"KUBE-CLUSTER-IP", "10.96.0.10,tcp:80"}, {"KUBE-CLUSTER-IP", "10.96.0.11,udp:53"},
		{"KUBE-IPVS-IPS", "10.96.0.10"}, {"KUBE-LOAD-BALANCER-SOURCE-CIDR", "203.0.113.10,tcp:80,198.51.100.0/24"},
		{"KUBE-LOOP-BACK", "10.244.1.2,tcp:8080,10.244.1.2"}, {"KUBE-NODE-PORT-TCP", "30080"},
	} {
		if err := s.AddEntry(e[0], e[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DelEntry("KUBE-CLUSTER-IP", "10.96.0.11,udp:53"); err != nil {
		t.Fatal(err)
	}
	got, err := ipvs.SaveIPSets(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `create KUBE-CLUSTER-IP hash:ip,port family inet
create KUBE-IPVS-IPS hash:ip family inet
create KUBE-LOAD-BALANCER-SOURCE-CIDR hash:ip,port,net family inet
create KUBE-LOOP-BACK hash:ip,port,ip family inet
create KUBE-NODE-PORT-TCP bitmap:port range 0-65535
add KUBE-CLUSTER-IP 10.96.0.10,tcp:80
add KUBE-IPVS-IPS 10.96.0.10
add KUBE-LOAD-BALANCER-SOURCE-CIDR 203.0.113.10,tcp:80,198.51.100.0/24
add KUBE-LOOP-BACK 10.244.1.2,tcp:8080,10.244.1.2
add KUBE-NODE-PORT-TCP 30080
`
	if got != want {
		t.Fatalf("read back:\n%s\nwant:\n%s", got, want)
	}
	if err := s.AddEntry("KUBE-IPVS-IPS", "10.96.0.10,tcp:80"); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err == nil || !strings.Contains(err.Error(), "restore") {
		t.Fatalf("an entry of the wrong type flushed with %v", err)
	}
}
