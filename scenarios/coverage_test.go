package scenarios

import (
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// scenarioFeatures are the features of the format that every scenario set
// below must exercise.
var scenarioFeatures = []string{
	"apply", "update", "delete", "patch.merge", "patch.endpoint", "churn", "restart",
	"fault.dataplaneOps", "fault.watchBreak", "connect", "close",
	"within", "syncs.count", "syncs.atLeast", "syncs.atMost", "syncs.at", "syncs.between",
	"dataplaneOps.count", "dataplaneOps.atLeast", "dataplaneOps.atMost", "dataplaneOps.between",
	"latency.exact", "latency.max", "ipvs", "ipvsFile", "draining", "addresses", "sysctls",
	"connections.result", "connections.server", "connections.state",
	"connections.latencyAtLeast", "connections.latencyAtMost",
	"syncCost.fixed", "syncCost.perService", "syncCost.perEndpoint", "configSyncPeriod", "retryInterval",
	"controllers.endpointSlice", "controllers.endpoints", "endpoints", "podReady", "rollingUpdate", "writes.count", "writes.atLeast", "writes.atMost", "delete.gracePeriod", "latency.pod",
	"programmingLatency.count", "programmingLatency.p50", "programmingLatency.p99", "programmingLatency.max",
	// The ingress-nginx controller (scenarios/ingressnginx).
	"ingressChurn", "fault.ingressReloadFailures", "fault.ingressPostFailures",
	"reloads.count", "reloads.at", "dynamicUpdates.count", "dynamicUpdates.at", "ingressBackends",
	"ingressLatency.exact", "ingressLatency.max", "ingressLatency.samples", "ingressMetrics",
	"ingressLatency.pod", "ingressLatency.pods", "ingressLatency.p50", "ingressLatency.p99",
	// the runner's vocabulary
	"burstRuns", "run", "retryAfter", "stop", "fault.syncs", "syncCost.list", "syncCost.step", "syncCost.profile",
	"nextRun.at", "nextRun.reason", "nextRun.none",
	// the operator's vocabulary (IPVS mode)
	"proxy.sysctls", "sysctls.step", "ipvs.weight", "ipvs.delete", "ipvs.flush", "send", "reset",
	"sends", "timeouts", "connExpiry", "arp", "arpSender", "abandon", "shutdown",
	// the iptables mode's
	"iptables", "iptablesFile", "route", "iptablesMetrics", "connection", "fault.restoreFailures",
	"iptablesFlush",
	// proxy.config: a kube-proxy configuration file
	"config",
	// a generated cluster (sim/clustergen)
	"cluster.generate",
	// kube-proxy's metrics (sim/kpmetrics)
	"metrics.value", "metrics.atLeast", "metrics.atMost", "metrics.count", "metrics.sum", "metrics.quantile", "metrics.labels",
}

// featuresOf lists the features a scenario uses, read from the keys its
// file sets (so that it holds for every mode's own keys too).
func featuresOf(s *Scenario) map[string]bool {
	used := map[string]bool{}
	var doc yaml.Node
	if err := yaml.Unmarshal(s.source, &doc); err != nil || len(doc.Content) == 0 {
		return used
	}
	get := func(n *yaml.Node, key string) *yaml.Node {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i+1]
			}
		}
		return nil
	}
	keys := func(n *yaml.Node) []string {
		var out []string
		if n != nil && n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				out = append(out, n.Content[i].Value)
			}
		}
		return out
	}
	root := doc.Content[0]
	proxy := get(root, "proxy")
	for _, k := range keys(get(proxy, "syncCost")) {
		used["syncCost."+k] = true
	}
	if get(proxy, "sysctls") != nil {
		used["proxy.sysctls"] = true
	}
	if c := get(proxy, "syncCost"); c != nil && c.Kind == yaml.SequenceNode {
		used["syncCost.list"] = true
	}
	for _, k := range []string{"configSyncPeriod", "retryInterval", "burstRuns", "config"} {
		if get(proxy, k) != nil {
			used[k] = true
		}
	}
	if get(get(root, "cluster"), "generate") != nil {
		used["cluster.generate"] = true
	}
	for _, k := range keys(get(root, "controllers")) {
		used["controllers."+k] = true
	}
	timeline := get(root, "timeline")
	if timeline == nil {
		return used
	}
	for _, st := range timeline.Content {
		for _, k := range keys(st) {
			switch k {
			case "apply", "update", "delete", "churn", "connect", "close", "ingressChurn", "run", "retryAfter", "stop", "connection", "podReady", "rollingUpdate":
				used[k] = true
				if k == "delete" && get(get(st, k), "gracePeriod") != nil {
					used["delete.gracePeriod"] = true
				}
			case "syncCost":
				used["syncCost.step"] = true
			case "sysctls":
				used["sysctls.step"] = true
			case "send", "reset", "abandon", "shutdown", "iptablesFlush":
				used[k] = true
			case "ipvs":
				for _, ik := range keys(get(st, k)) {
					if ik == "weight" || ik == "delete" || ik == "flush" {
						used["ipvs."+ik] = true
					}
				}
			case "restart":
				used[k] = get(st, k).Value == "true"
			case "patch":
				for _, pk := range keys(get(st, k)) {
					if pk == "merge" || pk == "endpoint" {
						used["patch."+pk] = true
					}
				}
			case "fault":
				for _, fk := range keys(get(st, k)) {
					used["fault."+fk] = true
				}
			}
		}
		e := get(st, "expect")
		for _, k := range keys(e) {
			switch k {
			case "syncs", "dataplaneOps", "latency", "reloads", "dynamicUpdates", "ingressLatency", "nextRun", "programmingLatency", "writes":
				for _, sk := range keys(get(e, k)) {
					used[k+"."+sk] = true
				}
			case "metrics":
				for _, sel := range keys(get(e, k)) {
					if strings.Contains(sel, "{") {
						used["metrics.labels"] = true
					}
					for _, mk := range keys(get(get(e, k), sel)) {
						used["metrics."+mk] = true
					}
				}
			case "connections":
				for _, c := range keys(get(e, k)) {
					for _, ck := range keys(get(get(e, k), c)) {
						used["connections."+ck] = true
					}
				}
			default:
				used[k] = true
			}
		}
	}
	return used
}

// Every feature is used by a scenario that must pass (the library or
// testdata/features) and by one that must fail (testdata/failing), so that
// switching the feature off turns a test red.
func TestEveryFeatureHasAPassingAndAFailingScenario(t *testing.T) {
	passing := map[string]bool{}
	for _, name := range TestedLibraryNames() {
		s, err := LoadLibrary(name)
		if err != nil {
			t.Fatal(err)
		}
		for f := range featuresOf(s) {
			passing[f] = true
		}
	}
	failing := map[string]bool{
		// A resync changes nothing an expectation can see; the failing check
		// is TestConfigSyncPeriodDeliversResyncs, which reads the trace.
		"configSyncPeriod": true,
	}
	for dir, set := range map[string]map[string]bool{"testdata/features": passing, "testdata/failing": failing} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, f := range files {
			s, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			for feat := range featuresOf(s) {
				set[feat] = true
			}
		}
	}
	var missing []string
	for _, f := range scenarioFeatures {
		if !passing[f] {
			missing = append(missing, f+" (no passing scenario)")
		}
		if !failing[f] {
			missing = append(missing, f+" (no failing scenario)")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Error(m)
	}
}
