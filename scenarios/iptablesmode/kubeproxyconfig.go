package iptablesmode

import (
	"net"
	"strings"

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
	if c.Config.DetectLocalMode != "ClusterCIDR" {
		return // listed as not modelled
	}
	c.Use("detectLocalMode")
	if c.Config.ClusterCIDR == "" {
		return
	}
	c.Use("clusterCIDR")
	var v4 string
	for _, s := range strings.Split(c.Config.ClusterCIDR, ",") {
		s = strings.TrimSpace(s)
		if ip, _, err := net.ParseCIDR(s); err == nil && ip.To4() != nil && v4 == "" {
			v4 = s
		} else {
			c.Warnf("clusterCIDR", "%s is not modelled (the iptables mode models IPv4 only): ignored", s)
		}
	}
	if v4 != "" {
		scenarios.SetFromConfig(c, "clusterCIDR", &set.ClusterCIDR, v4, "clusterCIDR")
	}
}

// SnapshotKey is the golden a scenario from `proxysim import` fills in.
func (Mode) SnapshotKey() string { return "iptables" }
