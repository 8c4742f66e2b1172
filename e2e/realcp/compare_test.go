package realcp

import (
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/proxysim/proxysim/netns"
)

// nfacctMatch is the match kube-proxy adds to a rule when the kernel has
// its nfacct counter ([K] pkg/proxy/iptables/proxier.go, the INVALID drop
// in KUBE-FORWARD). proxysim models no nfacct counters (sim/iptables
// render.go: they depend on the host), so the kernel's rule is compared
// without it.
var nfacctMatch = regexp.MustCompile(` -m nfacct --nfacct-name\s+\S+`)

// localhostNodePortRule is the rule kube-proxy adds to KUBE-NODEPORTS for
// each node port, for traffic to 127.0.0.0/8, only when the kernel has its
// localhost_nps_accepted_pkts nfacct counter ([K] pkg/proxy/iptables/
// proxier.go, localhost node ports); not modelled by proxysim (sim/iptables
// render.go), so left out of the kernel's table.
var localhostNodePortRule = regexp.MustCompile(`(?m)^-A KUBE-NODEPORTS .*--nfacct-name\s+localhost_nps_accepted_pkts.*\n`)

// withoutNFAcct is the kernel's iptables-save without what kube-proxy
// writes for its nfacct counters, and how many nat rules that was.
func withoutNFAcct(save string) (string, int) {
	n := len(localhostNodePortRule.FindAllString(save, -1))
	save = localhostNodePortRule.ReplaceAllString(save, "")
	return nfacctMatch.ReplaceAllString(save, ""), n
}

// compareTables compares proxysim's dataplane after a sync (iptables-save
// text, or an `nft -f` dump) with the kernel's (iptables-save, or `nft
// list table`), by meaning: netns.CompareSaves for iptables; for
// nftables the dump is loaded into a scratch namespace and listed by the
// same nft, then netns.CompareNFTLists.
func compareTables(mode, predicted, kernel string) error {
	if mode == "nftables" {
		want, err := listLoaded(predicted)
		if err != nil {
			return fmt.Errorf("the kernel refuses proxysim's table: %w", err)
		}
		return netns.CompareNFTLists(want, kernel)
	}
	kernel, _ = withoutNFAcct(kernel)
	return netns.CompareSaves(serviceOrder(predicted), serviceOrder(kernel))
}

// sharedChains are the chains every service port writes its rules into;
// kube-proxy meets the service ports in a Go map's order, proxysim in
// sorted order.
var sharedChains = map[string]bool{
	"KUBE-SERVICES": true, "KUBE-EXTERNAL-SERVICES": true, "KUBE-NODEPORTS": true, "KUBE-PROXY-FIREWALL": true,
}

// serviceOrder puts the rules of each shared chain in the order of the
// service port their comment names (each port's rules keep their order;
// rules for no service port, such as the node-ports jump, last): the same
// normalisation as the bubble comparison's (e2e/transcript
// CanonicalIPTables, 3), on iptables-save text.
func serviceOrder(save string) string {
	lines := strings.Split(save, "\n")
	var out []string
	for i := 0; i < len(lines); {
		chain := chainOf(lines[i])
		if !sharedChains[chain] {
			out = append(out, lines[i])
			i++
			continue
		}
		j := i
		for j < len(lines) && chainOf(lines[j]) == chain {
			j++
		}
		block := slices.Clone(lines[i:j])
		slices.SortStableFunc(block, func(a, b string) int { return strings.Compare(servicePortOf(a), servicePortOf(b)) })
		out = append(out, block...)
		i = j
	}
	return strings.Join(out, "\n")
}

// chainOf is the chain an "-A CHAIN ..." line appends to, "" otherwise.
func chainOf(line string) string {
	rest, ok := strings.CutPrefix(line, "-A ")
	if !ok {
		return ""
	}
	chain, _, _ := strings.Cut(rest, " ")
	return chain
}

// servicePortOf is the service port a rule's comment names ("ns/name" or
// "ns/name:port", its first word), or "\xff" (after every name) for a
// rule for no service port.
func servicePortOf(rule string) string {
	_, c, ok := strings.Cut(rule, "--comment ")
	if !ok {
		return "\xff"
	}
	word, _, _ := strings.Cut(strings.TrimPrefix(c, `"`), " ")
	word = strings.TrimSuffix(word, `"`)
	if !strings.Contains(word, "/") {
		return "\xff"
	}
	return word
}

// listLoaded loads an nft dump in a scratch namespace and lists the table
// as the kernel prints it.
func listLoaded(dump string) (string, error) {
	scratch, err := netns.Create("canon")
	if err != nil {
		return "", err
	}
	defer scratch.Close()
	err = scratch.Do(func() error {
		var stderr strings.Builder
		cmd := exec.Command("nft", "-f", "-")
		cmd.Stdin = strings.NewReader(dump)
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("nft -f: %w: %s", err, strings.TrimSpace(stderr.String()))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	nft, err := scratch.NFTables("ip", "kube-proxy")
	if err != nil {
		return "", err
	}
	return nft.ListTable("ip", "kube-proxy")
}

// comparedMetrics are the metrics whose every series must be equal on
// both sides: counters and gauges by value, histograms by sample count
// (their sums and buckets hold real durations). Timestamps are wall-clock
// on one side and virtual on the other: left out.
var comparedMetrics = []string{
	"kubeproxy_sync_proxy_rules_duration_seconds",
	"kubeproxy_sync_full_proxy_rules_duration_seconds",
	"kubeproxy_sync_partial_proxy_rules_duration_seconds",
	"kubeproxy_sync_proxy_rules_endpoint_changes_pending",
	"kubeproxy_sync_proxy_rules_endpoint_changes_total",
	"kubeproxy_sync_proxy_rules_service_changes_pending",
	"kubeproxy_sync_proxy_rules_service_changes_total",
	"kubeproxy_network_programming_duration_seconds",
	"kubeproxy_sync_proxy_rules_no_local_endpoints_total",
	"kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
	"kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total",
	"kubeproxy_sync_proxy_rules_iptables_total",
	"kubeproxy_sync_proxy_rules_iptables_last",
	"kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
	"kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total",
}

// seriesOfProcesses is the compared series of kube-proxy over its
// processes (one per start, the last one's text last): a restarted
// process counts from zero where proxysim's metrics go on, so counters and
// histogram sample counts are summed over the processes; gauges are the
// last process's.
func seriesOfProcesses(texts []string) (map[string]float64, error) {
	out := map[string]float64{}
	for i, text := range texts {
		one, err := seriesOf(text)
		if err != nil {
			return nil, err
		}
		gauges, err := gaugesOf(text)
		if err != nil {
			return nil, err
		}
		for k, v := range one {
			switch {
			case i == len(texts)-1:
				if gauges[k] {
					out[k] = v
				} else {
					out[k] += v
				}
			case !gauges[k]:
				out[k] += v
			}
		}
	}
	return out, nil
}

// gaugesOf says which compared series of a scrape are gauges.
func gaugesOf(text string) (map[string]bool, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, name := range comparedMetrics {
		if f := fams[name]; f != nil && f.GetType() == dto.MetricType_GAUGE {
			for _, m := range f.GetMetric() {
				out[name+labelsOf(m)] = true
			}
		}
	}
	return out, nil
}

// series is one metric series' compared value, keyed by name and labels.
func seriesOf(text string) (map[string]float64, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, name := range comparedMetrics {
		f := fams[name]
		if f == nil {
			continue
		}
		for _, m := range f.GetMetric() {
			key := name + labelsOf(m)
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key+" count"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out, nil
}

func labelsOf(m *dto.Metric) string {
	var l []string
	for _, p := range m.GetLabel() {
		l = append(l, p.GetName()+"="+p.GetValue())
	}
	slices.Sort(l)
	return "{" + strings.Join(l, ",") + "}"
}

// compareMetrics lists the compared series whose values differ, or that
// only one side has.
// localhostRules is the number of localhost node-port rules in the
// kernel's last table (localhostNodePortRule): kube-proxy counts them in
// its nat rule gauges, proxysim writes none.
// real holds one scrape per kube-proxy process, in order (see
// seriesOfProcesses).
func compareMetrics(real []string, predicted string, localhostRules int, skip ...string) []string {
	r, err := seriesOfProcesses(real)
	if err != nil {
		return []string{fmt.Sprintf("kube-proxy's /metrics: %v", err)}
	}
	for _, g := range []string{"kubeproxy_sync_proxy_rules_iptables_total", "kubeproxy_sync_proxy_rules_iptables_last"} {
		if k := g + "{ip_family=IPv4,table=nat}"; localhostRules > 0 {
			r[k] -= float64(localhostRules)
		}
	}
	p, err := seriesOf(predicted)
	if err != nil {
		return []string{fmt.Sprintf("proxysim's metrics: %v", err)}
	}
	var keys []string
	for k := range r {
		keys = append(keys, k)
	}
	for k := range p {
		if _, ok := r[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var diffs []string
	for _, k := range keys {
		if slices.ContainsFunc(skip, func(name string) bool { return strings.HasPrefix(k, name+"{") }) {
			continue
		}
		rv, rok := r[k]
		pv, pok := p[k]
		switch {
		case !rok:
			diffs = append(diffs, fmt.Sprintf("metric %s: predicted %v, kube-proxy has none", k, pv))
		case !pok:
			diffs = append(diffs, fmt.Sprintf("metric %s: kube-proxy %v, not predicted", k, rv))
		case rv != pv:
			diffs = append(diffs, fmt.Sprintf("metric %s: predicted %v, kube-proxy %v", k, pv, rv))
		}
	}
	return diffs
}
