package ipvs

import (
	"fmt"
	"net"
	"sort"
	"strings"
)

// Table renders the IPVS state like `ipvsadm -Ln`, sorted so that the same
// state always reads the same.
func Table(h Handle) (string, error) {
	vss, err := h.VirtualServers()
	if err != nil {
		return "", err
	}
	sort.Slice(vss, func(i, j int) bool { return lessVS(vss[i], vss[j]) })
	var b strings.Builder
	b.WriteString("Prot LocalAddress:Port Scheduler Flags\n")
	b.WriteString("  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n")
	for _, vs := range vss {
		line := fmt.Sprintf("%-4s %s %s", vs.Protocol, hostPort(vs.Address, vs.Port), vs.Scheduler)
		if vs.Persistent {
			line += fmt.Sprintf(" persistent %d", vs.Timeout)
		}
		b.WriteString(line + "\n")
		rss, err := h.RealServers(vs)
		if err != nil {
			return "", err
		}
		sort.Slice(rss, func(i, j int) bool { return lessAddrPort(rss[i].Address, rss[i].Port, rss[j].Address, rss[j].Port) })
		for _, rs := range rss {
			fmt.Fprintf(&b, "  -> %-28s Masq    %-6d %-10d %d\n", hostPort(rs.Address, rs.Port), rs.Weight, rs.ActiveConn, rs.InactiveConn)
		}
	}
	return b.String(), nil
}

func hostPort(addr string, port uint16) string { return net.JoinHostPort(addr, fmt.Sprint(port)) }

func lessVS(a, b VirtualServer) bool {
	if a.Protocol != b.Protocol {
		return a.Protocol < b.Protocol
	}
	return lessAddrPort(a.Address, a.Port, b.Address, b.Port)
}

func lessAddrPort(a string, ap uint16, b string, bp uint16) bool {
	ai, bi := net.ParseIP(a).To16(), net.ParseIP(b).To16()
	if c := strings.Compare(string(ai), string(bi)); c != 0 {
		return c < 0
	}
	return ap < bp
}
