package migrate

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// NodeCheck is what one node must have for the target mode, as its Node
// object tells (status.nodeInfo), and whether it has it.
type NodeCheck struct {
	Node    string `json:"node"`
	Kernel  string `json:"kernel"`
	OSImage string `json:"osImage"`
	// NFT is the nft version the OS image ships, when the table below
	// knows the image ("" otherwise).
	NFT string `json:"nft,omitempty"`
	// Ready is false when the node cannot run the target mode.
	Ready bool `json:"ready"`
	// Why says what decided, in words.
	Why  string   `json:"why"`
	Cite []string `json:"cite,omitempty"`
}

// nftablesMinKernel is kube-proxy's own check before it starts in nftables
// mode (pkg/proxy/nftables/supported.go getNFTablesInterface,
// utilkernel.NFTablesKubeProxyKernelVersion): it takes kernel 5.13 as a
// sign that the host's nft is at least 1.0.1.
var nftablesMinKernel = [3]int{5, 13, 0}

// nftMin is the oldest nft knftables accepts (knftables.New refuses v0.*
// and v1.0.0), and the host's nft must be as new: an older one cannot
// read the table kube-proxy writes and breaks (kubernetes issue 122743).
var nftMin = [3]int{1, 0, 1}

// osNFT is the nft each OS image ships, by the start of status.nodeInfo.
// osImage. Sources: the distributions' package archives
// (packages.debian.org/<release>/nftables, packages.ubuntu.com/<release>/
// nftables); bookworm's was also read on this project's host
// (1.0.6-2+deb12u2). Images not listed are judged by their kernel alone.
var osNFT = []struct{ prefix, nft, source string }{
	{"Debian GNU/Linux 10", "0.9.0", "packages.debian.org/buster/nftables"},
	{"Debian GNU/Linux 11", "0.9.8", "packages.debian.org/bullseye/nftables"},
	{"Debian GNU/Linux 12", "1.0.6", "packages.debian.org/bookworm/nftables"},
	{"Debian GNU/Linux 13", "1.1.3", "packages.debian.org/trixie/nftables"},
	{"Ubuntu 18.04", "0.8.2", "packages.ubuntu.com/bionic/nftables"},
	{"Ubuntu 20.04", "0.9.3", "packages.ubuntu.com/focal/nftables"},
	{"Ubuntu 22.04", "1.0.2", "packages.ubuntu.com/jammy/nftables"},
	{"Ubuntu 24.04", "1.0.9", "packages.ubuntu.com/noble/nftables"},
}

var kernelRE = regexp.MustCompile(`^(\d+)\.(\d+)(?:\.(\d+))?`)

func parseVersion(s string) ([3]int, bool) {
	m := kernelRE.FindStringSubmatch(strings.TrimPrefix(strings.TrimSpace(s), "v"))
	if m == nil {
		return [3]int{}, false
	}
	var v [3]int
	for i := range 3 {
		if m[i+1] != "" {
			v[i], _ = strconv.Atoi(m[i+1])
		}
	}
	return v, true
}

func less(a, b [3]int) bool {
	for i := range 3 {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func vstr(v [3]int) string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }

// checkNodes judges every node for the target mode.
func checkNodes(nodes []*node, to string) []NodeCheck {
	var out []NodeCheck
	for _, n := range nodes {
		c := NodeCheck{Node: n.Name, Kernel: n.Kernel, OSImage: n.OS, Ready: true}
		switch to {
		case "nftables":
			c.Cite = []string{"kubernetes pkg/proxy/nftables/supported.go getNFTablesInterface (kernel >= 5.13 unless KUBE_PROXY_NFTABLES_SKIP_KERNEL_VERSION_CHECK is set)", "sigs.k8s.io/knftables New (nft >= 1.0.1)", "kubernetes issue 122743 (an older host nft breaks on kube-proxy's table)"}
			k, ok := parseVersion(n.Kernel)
			var why []string
			switch {
			case n.Kernel == "":
				c.Ready = false
				why = append(why, "the Node shows no kernel version (status.nodeInfo.kernelVersion): cannot tell")
			case !ok:
				c.Ready = false
				why = append(why, fmt.Sprintf("kernel %q is not a version proxysim reads: cannot tell", n.Kernel))
			case less(k, nftablesMinKernel):
				c.Ready = false
				why = append(why, fmt.Sprintf("kernel %s is older than %s: kube-proxy refuses to start in nftables mode", n.Kernel, vstr(nftablesMinKernel)))
			default:
				why = append(why, fmt.Sprintf("kernel %s is %s or later", n.Kernel, vstr(nftablesMinKernel)))
			}
			for _, o := range osNFT {
				if !strings.HasPrefix(n.OS, o.prefix) {
					continue
				}
				c.NFT = o.nft
				c.Cite = append(c.Cite, o.source)
				v, _ := parseVersion(o.nft)
				if less(v, nftMin) {
					c.Ready = false
					why = append(why, fmt.Sprintf("%s ships nft %s, older than %s: its nft cannot read kube-proxy's table (kernel check or not)", o.prefix, o.nft, vstr(nftMin)))
				} else {
					why = append(why, fmt.Sprintf("%s ships nft %s", o.prefix, o.nft))
				}
			}
			c.Why = strings.Join(why, "; ")
		case "ipvs":
			c.Why = "no kernel minimum checked: the IPVS mode needs the ip_vs modules and ipset on the node, which a Node object does not show; the mode is deprecated from v1.35 (KEP-5495)"
			c.Cite = []string{"kubernetes pkg/proxy/ipvs/proxier.go CanUseIPVSProxier", "KEP-5495"}
		default:
			c.Why = "no kernel minimum: the iptables mode runs on any kernel kube-proxy supports"
		}
		out = append(out, c)
	}
	return out
}
