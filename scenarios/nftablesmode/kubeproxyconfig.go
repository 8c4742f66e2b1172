package nftablesmode

import (
	"github.com/proxysim/proxysim/scenarios"
)

// FromKubeProxyConfig maps a kube-proxy configuration file's nftables
// settings (proxy.config): the nftables section's sync periods and
// masqueradeAll (pkg/proxy/apis/config/v1alpha1/conversion.go),
// nodePortAddresses where this mode models it (unset, or "primary", which
// kube-proxy's nftables mode defaults to: cmd/kube-proxy/app/server_linux.go
// platformApplyDefaults), and the ClusterCIDR local-traffic detector; IPv4
// only.
func (Mode) FromKubeProxyConfig(c *scenarios.KubeProxyConfig, p *scenarios.Proxy) {
	set, ok := p.Settings.(*Settings)
	if !ok {
		return
	}
	nft := c.Config.NFTables
	c.SyncPeriods(p, "nftables", nft.SyncPeriod, nft.MinSyncPeriod)
	scenarios.SetFromConfig(c, "masqueradeAll", &set.MasqueradeAll, nft.MasqueradeAll, "nftables.masqueradeAll")
	if npa := c.Config.NodePortAddresses; len(npa) == 1 && npa[0] == "primary" {
		if len(set.NodeIPs) == 0 && !c.Explicit("nodePortAddresses") {
			c.Errorf("nodePortAddresses", "nodePortAddresses primary (kube-proxy's nftables default) needs the node's addresses: give proxy.nodeIPs")
		}
		scenarios.SetFromConfig(c, "nodePortAddresses", &set.NodePortAddresses, "primary", "nodePortAddresses")
	}
	c.ClusterCIDRDetector(Name, &set.ClusterCIDR)
}

// SnapshotKey is the golden a scenario from `proxysim import` fills in.
func (Mode) SnapshotKey() string { return "nftables" }
