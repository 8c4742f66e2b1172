package ipvs

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
)

// IPSetType is an ipset's type, as `ipset create NAME TYPE` names it.
type IPSetType string

// The types kube-proxy's IPVS proxier uses (pkg/proxy/ipvs/ipset/types.go).
const (
	HashIP        IPSetType = "hash:ip"
	HashIPPort    IPSetType = "hash:ip,port"
	HashIPPortIP  IPSetType = "hash:ip,port,ip"
	HashIPPortNet IPSetType = "hash:ip,port,net"
	BitmapPort    IPSetType = "bitmap:port"
)

// dims is how many values an element of the type has, and so how many
// src/dst flags a `--match-set` of it takes.
func (t IPSetType) dims() int {
	switch t {
	case HashIP, BitmapPort:
		return 1
	case HashIPPort:
		return 2
	case HashIPPortIP, HashIPPortNet:
		return 3
	}
	return 0
}

// IPSet is one set: its name, type, family (inet or inet6; a bitmap has
// none) and comment. kube-proxy creates every set with -exist.
type IPSet struct {
	Name    string
	Type    IPSetType
	Family  string // "inet" or "inet6"
	Comment string
}

// IPSetHandle programs ipsets in one network namespace: what kube-proxy's
// utilipset.Interface does for the IPVS proxier. fakes.IPSets implements
// it in memory.
type IPSetHandle interface {
	// CreateSet creates the set unless one of that name exists (-exist).
	CreateSet(IPSet) error
	// Sets lists every set (`ipset list -t`), sorted by name.
	Sets() ([]IPSet, error)
	// ListEntries lists a set's members in their text form.
	ListEntries(set string) ([]string, error)
	// AddEntry adds a member (-exist): an entry that does not fit the
	// set's type or family is an error.
	AddEntry(set, entry string) error
	// DelEntry deletes a member; deleting one that is not there is an error.
	DelEntry(set, entry string) error
}

// IPSetEntry is one member of a set. Which fields count depends on the
// type: IP (all but bitmap:port), Protocol and Port (all but hash:ip),
// IP2 (hash:ip,port,ip), Net (hash:ip,port,net).
type IPSetEntry struct {
	IP       string
	Protocol string // tcp, udp or sctp
	Port     int
	IP2      string
	Net      string
}

// String is the entry as `ipset add` takes it and `ipset list` prints it
// (pkg/proxy/ipvs/ipset/ipset.go Entry.String): 10.96.0.1,tcp:443 for
// hash:ip,port, 30080 for bitmap:port.
func (e IPSetEntry) String(t IPSetType) string {
	port := strconv.Itoa(e.Port)
	switch t {
	case HashIP:
		return e.IP
	case HashIPPort:
		return e.IP + "," + e.Protocol + ":" + port
	case HashIPPortIP:
		return e.IP + "," + e.Protocol + ":" + port + "," + e.IP2
	case HashIPPortNet:
		return e.IP + "," + e.Protocol + ":" + port + "," + e.Net
	case BitmapPort:
		return port
	}
	return ""
}

// ParseIPSetEntry reads an entry of a set, refusing what ipset would:
// the wrong number of parts, an address of the other family, a bad port
// or protocol.
func ParseIPSetEntry(set IPSet, s string) (IPSetEntry, error) {
	var e IPSetEntry
	bad := func(why string) error {
		return fmt.Errorf("ipset %s (%s): bad entry %q: %s", set.Name, set.Type, s, why)
	}
	ip := func(text string) (string, error) {
		a := net.ParseIP(text)
		if a == nil {
			return "", bad("not an IP address: " + text)
		}
		if (a.To4() != nil) != (set.Family != "inet6") {
			return "", bad("address of the other family: " + text)
		}
		return a.String(), nil
	}
	port := func(text string) (int, error) {
		p, err := strconv.Atoi(text)
		if err != nil || p < 0 || p > 65535 {
			return 0, bad("bad port " + text)
		}
		return p, nil
	}
	if set.Type == BitmapPort {
		p, err := port(s)
		e.Port = p
		return e, err
	}
	parts := strings.Split(s, ",")
	if len(parts) != set.Type.dims() {
		return e, bad(fmt.Sprintf("want %d comma-separated parts", set.Type.dims()))
	}
	var err error
	if e.IP, err = ip(parts[0]); err != nil {
		return e, err
	}
	if set.Type == HashIP {
		return e, nil
	}
	proto, num, ok := strings.Cut(parts[1], ":")
	switch {
	case !ok:
		return e, bad("want PROTO:PORT")
	case proto != "tcp" && proto != "udp" && proto != "sctp":
		return e, bad("unknown protocol " + proto)
	}
	e.Protocol = proto
	if e.Port, err = port(num); err != nil {
		return e, err
	}
	switch set.Type {
	case HashIPPortIP:
		e.IP2, err = ip(parts[2])
	case HashIPPortNet:
		_, n, perr := net.ParseCIDR(parts[2])
		if perr != nil {
			return e, bad("not a CIDR: " + parts[2])
		}
		if (n.IP.To4() != nil) != (set.Family != "inet6") {
			return e, bad("network of the other family: " + parts[2])
		}
		e.Net = n.String()
	}
	return e, err
}

// IPSetContents is a set and its members, as a tracer reads them.
type IPSetContents struct {
	Set     IPSet
	Entries []string
}

// Match answers `-m set --match-set NAME flags` for a packet from src to
// dst:dport over proto: flags pick, for each dimension of the set's
// elements in order, the packet's source or destination (kernel
// net/netfilter/ipset; a port dimension takes the packet's port and
// protocol, and a bitmap:port any protocol with ports). Source ports are
// not modelled: kube-proxy never matches them.
func (c IPSetContents) Match(flags string, src, dst net.IP, proto string, dport int) (bool, error) {
	dirs := strings.Split(flags, ",")
	if len(dirs) < c.Set.Type.dims() {
		return false, fmt.Errorf("ipset %s (%s): --match-set flags %q name fewer than its %d dimensions", c.Set.Name, c.Set.Type, flags, c.Set.Type.dims())
	}
	addr := func(d string) net.IP {
		if d == "src" {
			return src
		}
		return dst
	}
	portDim := func(i int) error {
		if dirs[i] != "dst" {
			return fmt.Errorf("ipset %s: source ports are not modelled", c.Set.Name)
		}
		return nil
	}
	if (src.To4() != nil) != (c.Set.Family != "inet6") && c.Set.Type != BitmapPort {
		return false, nil // the kernel skips a set of the other family
	}
	for _, raw := range c.Entries {
		e, err := ParseIPSetEntry(c.Set, raw)
		if err != nil {
			return false, err
		}
		switch c.Set.Type {
		case BitmapPort:
			if err := portDim(0); err != nil {
				return false, err
			}
			if proto != "" && e.Port == dport {
				return true, nil
			}
			continue
		case HashIP:
			if net.ParseIP(e.IP).Equal(addr(dirs[0])) {
				return true, nil
			}
			continue
		}
		if err := portDim(1); err != nil {
			return false, err
		}
		if !net.ParseIP(e.IP).Equal(addr(dirs[0])) || e.Protocol != proto || e.Port != dport {
			continue
		}
		switch c.Set.Type {
		case HashIPPort:
			return true, nil
		case HashIPPortIP:
			if net.ParseIP(e.IP2).Equal(addr(dirs[2])) {
				return true, nil
			}
		case HashIPPortNet:
			if _, n, _ := net.ParseCIDR(e.Net); n.Contains(addr(dirs[2])) {
				return true, nil
			}
		}
	}
	return false, nil
}

// ReadIPSets is every set of h with its members: what a tracer reads.
func ReadIPSets(h IPSetHandle) (map[string]IPSetContents, error) {
	sets, err := h.Sets()
	if err != nil {
		return nil, err
	}
	out := make(map[string]IPSetContents, len(sets))
	for _, s := range sets {
		e, err := h.ListEntries(s.Name)
		if err != nil {
			return nil, err
		}
		slices.Sort(e)
		out[s.Name] = IPSetContents{Set: s, Entries: e}
	}
	return out, nil
}

// SaveIPSets lists every set of h and its members as `ipset save` does,
// minus the sizes: create lines, then add lines, sets by name, members
// sorted. The same sets always give the same text (for goldens).
func SaveIPSets(h IPSetHandle) (string, error) {
	sets, err := ReadIPSets(h)
	if err != nil {
		return "", err
	}
	names := slices.Sorted(maps.Keys(sets))
	var b strings.Builder
	for _, n := range names {
		s := sets[n].Set
		if s.Type == BitmapPort {
			fmt.Fprintf(&b, "create %s %s range 0-65535\n", s.Name, s.Type)
		} else {
			fmt.Fprintf(&b, "create %s %s family %s\n", s.Name, s.Type, s.Family)
		}
	}
	for _, n := range names {
		for _, e := range sets[n].Entries {
			fmt.Fprintf(&b, "add %s %s\n", n, e)
		}
	}
	return b.String(), nil
}
