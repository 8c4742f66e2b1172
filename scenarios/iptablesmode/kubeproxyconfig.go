package iptablesmode

import (
	"github.com/proxysim/proxysim/scenarios"
)

// FromKubeProxyConfig maps a kube-proxy configuration file's iptables
// settings (proxy.config): the iptables section's sync periods
// (pkg/proxy/apis/config/v1alpha1/conversion.go), masqueradeAll, and the
// ClusterCIDR local-traffic detector (detectLocalMode ClusterCIDR with
// clusterCIDR), the one this mode models; IPv4 only.
func (Mode) FromKubeProxyConfig(c *scenarios.KubeProxyConfig, p *scenarios.Proxy) {
	set, ok := p.Settings.(*Settings)
	if !ok {
		return
	}
	ipt := c.Config.IPTables
	c.SyncPeriods(p, "iptables", ipt.SyncPeriod, ipt.MinSyncPeriod)
	scenarios.SetFromConfig(c, "masqueradeAll", &set.MasqueradeAll, ipt.MasqueradeAll, "iptables.masqueradeAll")
	c.ClusterCIDRDetector(Name, &set.ClusterCIDR)
}

// SnapshotKey is the golden a scenario from `proxysim import` fills in.
func (Mode) SnapshotKey() string { return "iptables" }
