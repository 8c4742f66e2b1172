package ipvsmode

import (
	"net"

	"github.com/proxysim/proxysim/scenarios"
)

// FromKubeProxyConfig maps a kube-proxy configuration file's IPVS settings
// (proxy.config): the ipvs section's sync periods, which the IPVS proxier
// runs with (pkg/proxy/apis/config/v1alpha1/conversion.go), its scheduler,
// strictARP and timeouts, and nodePortAddresses, which choose the node
// addresses NodePort virtual servers listen on.
func (Mode) FromKubeProxyConfig(c *scenarios.KubeProxyConfig, p *scenarios.Proxy) {
	set, ok := p.Settings.(*Settings)
	if !ok {
		return
	}
	ipvs := c.Config.IPVS
	c.SyncPeriods(p, "ipvs", ipvs.SyncPeriod, ipvs.MinSyncPeriod)
	switch {
	case ipvs.Scheduler == "":
		c.Use("ipvs.scheduler") // the proxier's own default, rr
	case !Schedulers[ipvs.Scheduler] && !c.Explicit("scheduler"):
		c.Errorf("ipvs.scheduler", "scheduler %q is not modelled (want rr, wrr or sh); give proxy.scheduler to replay with another", ipvs.Scheduler)
	default:
		scenarios.SetFromConfig(c, "scheduler", &set.Scheduler, ipvs.Scheduler, "ipvs.scheduler")
	}
	scenarios.SetFromConfig(c, "strictARP", &set.StrictARP, ipvs.StrictARP, "ipvs.strictARP")
	scenarios.SetFromConfig(c, "ipvsTimeouts.tcp", &set.IPVSTimeouts.TCP, scenarios.Duration(ipvs.TCPTimeout.Duration), "ipvs.tcpTimeout")
	scenarios.SetFromConfig(c, "ipvsTimeouts.tcpFin", &set.IPVSTimeouts.TCPFin, scenarios.Duration(ipvs.TCPFinTimeout.Duration), "ipvs.tcpFinTimeout")
	scenarios.SetFromConfig(c, "ipvsTimeouts.udp", &set.IPVSTimeouts.UDP, scenarios.Duration(ipvs.UDPTimeout.Duration), "ipvs.udpTimeout")
	// The IPVS proxier's iptables rules read the iptables section's
	// masqueradeAll and the local-traffic detector (proxy.packetPath).
	scenarios.SetFromConfig(c, "masqueradeAll", &set.MasqueradeAll, c.Config.IPTables.MasqueradeAll, "iptables.masqueradeAll")
	c.ClusterCIDRDetector(Name, &set.ClusterCIDR)
	if len(c.Config.NodePortAddresses) > 0 {
		c.Use("nodePortAddresses")
		set.NodeIPs = nodePortIPs(set.NodeIPs, c.Config.NodePortAddresses)
	}
}

// nodePortIPs keeps the node addresses NodePorts listen on: those in the
// CIDRs given, or with "primary" the first address of each IP family
// (kube-proxy's node primary IPs, the Node's first InternalIP of a family).
func nodePortIPs(nodeIPs, cidrs []string) []string {
	var out []string
	seen := map[bool]bool{}
	for _, s := range nodeIPs {
		ip := net.ParseIP(s)
		if ip == nil {
			out = append(out, s) // Validate reports it
			continue
		}
		for _, c := range cidrs {
			if c == "primary" {
				if v4 := ip.To4() != nil; !seen[v4] {
					seen[v4] = true
					out = append(out, s)
				}
				break
			}
			if _, n, err := net.ParseCIDR(c); err == nil && n.Contains(ip) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// SnapshotKey is the golden a scenario from `proxysim import` fills in.
func (Mode) SnapshotKey() string { return "ipvs" }
