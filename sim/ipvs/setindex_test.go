package ipvs

import (
	"fmt"
	"net"
	"testing"

	"github.com/proxysim/proxysim/sim/iptables"
)

// The PathView's set index answers every `-m set` match as the whole set
// does (IPSetContents.Match): each set type, flags naming source or
// destination (or too few dimensions), packets with and without a
// protocol, in the set or not.
func TestSetIndexAgreesWithMatch(t *testing.T) {
	sets := []IPSetContents{
		{Set: IPSet{Name: "ip", Type: HashIP, Family: "inet"}, Entries: []string{"10.0.0.1", "10.0.0.2"}},
		{Set: IPSet{Name: "ipport", Type: HashIPPort, Family: "inet"}, Entries: []string{"10.0.0.1,tcp:80", "10.0.0.2,udp:53", "10.0.0.1,tcp:443"}},
		{Set: IPSet{Name: "ipportip", Type: HashIPPortIP, Family: "inet"}, Entries: []string{"10.0.0.1,tcp:80,10.0.0.1", "10.0.0.2,tcp:80,10.0.0.9"}},
		{Set: IPSet{Name: "ipportnet", Type: HashIPPortNet, Family: "inet"}, Entries: []string{"10.0.0.1,tcp:80,10.0.0.0/24", "10.0.0.2,tcp:80,192.168.0.0/16"}},
		{Set: IPSet{Name: "ports", Type: BitmapPort, Family: "inet"}, Entries: []string{"30080", "30443"}},
		{Set: IPSet{Name: "noports", Type: BitmapPort, Family: "inet"}},
		{Set: IPSet{Name: "ip6", Type: HashIPPort, Family: "inet6"}, Entries: []string{"fd00::1,tcp:80"}},
	}
	view := &PathView{Sets: map[string]IPSetContents{}}
	for _, s := range sets {
		view.Sets[s.Set.Name] = s
	}
	tr := &tracer{view: view}
	addrs := []string{"10.0.0.1", "10.0.0.2", "10.0.0.9", "192.168.3.4"}
	flags := []string{"dst", "src", "dst,dst", "src,dst", "dst,src", "dst,dst,dst", "dst,dst,src", "src,dst,dst", "dst,src,src"}
	ports := []int{53, 80, 443, 30080, 30443}
	n, matched, failed := 0, 0, 0
	for _, s := range sets {
		for _, f := range flags {
			for _, src := range addrs {
				for _, dst := range addrs {
					for _, proto := range []string{"tcp", "udp", ""} {
						for _, port := range ports {
							p := iptables.Path{Dst: net.ParseIP(dst), DPort: port}
							want, werr := s.Match(f, net.ParseIP(src), p.Dst, proto, port)
							got, gerr := tr.matchSet(s.Set.Name, f, net.ParseIP(src), proto, p)
							if got != want || fmt.Sprint(gerr) != fmt.Sprint(werr) {
								t.Fatalf("%s %s from %s to %s %s:%d: indexed %v %v, the whole set %v %v", s.Set.Name, f, src, dst, proto, port, got, gerr, want, werr)
							}
							n++
							if want {
								matched++
							}
							if werr != nil {
								failed++
							}
						}
					}
				}
			}
		}
	}
	// Every set was looked up through its index at least once.
	if len(view.setIndex) != len(sets) {
		t.Fatalf("%d of %d sets indexed", len(view.setIndex), len(sets))
	}
	if matched < 100 || failed < 100 {
		t.Fatalf("of %d matches, %d held and %d failed", n, matched, failed)
	}
}
