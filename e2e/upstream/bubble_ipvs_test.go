package upstream

// kube-proxy v1.36's IPVS proxier in the bubble (see bubble_test.go): its
// NewProxier over upstream's fake IPVS, ipset, iptables and sysctl, with
// its netlink handle swapped for pkg/proxy/ipvs/testing's fake (NewProxier
// hard-wires the real one). The dataplane compared is the IPVS table,
// rendered as proxysim's sim/ipvs.Table renders its own.

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	sysctltest "k8s.io/component-helpers/node/util/sysctl/testing"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/proxy/conntrack"
	"k8s.io/kubernetes/pkg/proxy/healthcheck"
	kipvs "k8s.io/kubernetes/pkg/proxy/ipvs"
	ipsettest "k8s.io/kubernetes/pkg/proxy/ipvs/ipset/testing"
	ipvsnetlinktest "k8s.io/kubernetes/pkg/proxy/ipvs/testing"
	utilipvs "k8s.io/kubernetes/pkg/proxy/ipvs/util"
	ipvstest "k8s.io/kubernetes/pkg/proxy/ipvs/util/testing"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
	iptablestest "k8s.io/kubernetes/pkg/util/iptables/testing"

	"github.com/proxysim/proxysim/e2e/transcript"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/ipvsmode"
)

type ipvsTarget struct {
	s       *scenarios.Scenario
	ipvs    *ipvstest.FakeIPVS
	log     *transcript.SyncLog
	proxier any
	charge  *transcript.Charge
}

func newIPVSTarget(s *scenarios.Scenario, tr *transcript.Transcript) bubbleTarget {
	t := &ipvsTarget{s: s, ipvs: ipvstest.NewFake()}
	t.log = transcript.NewSyncLog(time.Now(), func() string { return ipvsTable(t.ipvs) })
	t.charge = newCharge(tr, t.log, &t.proxier)
	return t
}

// chargedIPT is the IPVS proxier's fake iptables: its one restore a sync,
// after the sync's IPVS calls, charges the sync's cost.
type chargedIPT struct {
	*iptablestest.FakeIPTables
	charge *transcript.Charge
}

func (f *chargedIPT) RestoreAll(data []byte, flush utiliptables.FlushFlag, counters utiliptables.RestoreCountersFlag) error {
	defer f.charge.Sync()
	return f.FakeIPTables.RestoreAll(data, flush, counters)
}

func (t *ipvsTarget) Fail(int)                     {}
func (t *ipvsTarget) Syncs() []transcript.Observed { return t.log.Syncs() }

func (t *ipvsTarget) Start(ctx context.Context, client kubernetes.Interface) (func(), error) {
	set := t.s.Proxy.Settings.(*ipvsmode.Settings)
	ctx = klog.NewContext(ctx, t.log.Logger())
	p, err := kipvs.NewProxier(ctx, v1.IPv4Protocol, &chargedIPT{FakeIPTables: iptablestest.NewFake(), charge: t.charge}, t.ipvs, ipsettest.NewFake("7.1"), sysctltest.NewFake(),
		syncPeriodOf(t.s), minSyncPeriodOf(t.s), nil, set.StrictARP, 0, 0, 0, false, 14, proxyutil.NewNoOpLocalDetector(),
		nodeNameOf(t.s), firstIPv4(set.NodeIPs), nil, nil, set.Scheduler, nil, false)
	if err != nil {
		return nil, err
	}
	t.proxier = p
	nl := ipvsnetlinktest.NewFakeNetlinkHandle(false)
	if len(set.NodeIPs) > 0 {
		_ = nl.SetLocalAddresses("eth0", set.NodeIPs...)
	}
	setUnexported(p, "netlinkHandle", kipvs.NetLinkHandle(nl))
	setUnexported(p, "conntrack", conntrack.NewFake())
	setUnexported(p, "serviceHealthServer", healthcheck.NewFakeServiceHealthServer())
	if t.s.Proxy.Zone != "" {
		knownZone(p, t.s.Proxy.Zone)
	}
	return kubeProxyNode(ctx, client, p, resyncOf(t.s))
}

// ipvsTable renders upstream's fake IPVS like sim/ipvs.Table.
func ipvsTable(f *ipvstest.FakeIPVS) string {
	vss, err := f.GetVirtualServers()
	if err != nil {
		return "error: " + err.Error()
	}
	key := func(proto string, ip net.IP, port uint16) string {
		return fmt.Sprintf("%s %s %05d", proto, string(ip.To16()), port)
	}
	sort.Slice(vss, func(i, j int) bool {
		return key(vss[i].Protocol, vss[i].Address, vss[i].Port) < key(vss[j].Protocol, vss[j].Address, vss[j].Port)
	})
	var b strings.Builder
	b.WriteString("Prot LocalAddress:Port Scheduler Flags\n")
	b.WriteString("  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n")
	for _, vs := range vss {
		line := fmt.Sprintf("%-4s %s %s", vs.Protocol, net.JoinHostPort(vs.Address.String(), fmt.Sprint(vs.Port)), vs.Scheduler)
		if vs.Flags&utilipvs.FlagPersistent != 0 {
			line += fmt.Sprintf(" persistent %d", vs.Timeout)
		}
		b.WriteString(line + "\n")
		rss, err := f.GetRealServers(vs)
		if err != nil {
			return "error: " + err.Error()
		}
		sort.Slice(rss, func(i, j int) bool {
			return key("", rss[i].Address, rss[i].Port) < key("", rss[j].Address, rss[j].Port)
		})
		for _, rs := range rss {
			fmt.Fprintf(&b, "  -> %-28s Masq    %-6d %-10d %d\n", net.JoinHostPort(rs.Address.String(), fmt.Sprint(rs.Port)), rs.Weight, rs.ActiveConn, rs.InactiveConn)
		}
	}
	return b.String()
}

func identity(s string) (string, error) { return s, nil }

// TestKubeProxyIPVSInBubble replays the IPVS library scenarios (the
// default mode) through kube-proxy v1.36.3's IPVS proxier in a bubble.
// The dataplane compared is the IPVS table only: upstream's fake netlink
// handle keeps the kube-ipvs0 addresses, proxysim's fake its own, and the
// IPVS proxier's ipset and iptables rules have no proxysim model.
func TestKubeProxyIPVSInBubble(t *testing.T) {
	runBubble(t, "ipvs", "ipvs", libraryOfMode(t, "ipvs"), newIPVSTarget, identity, lineDiff)
}
