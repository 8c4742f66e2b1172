package scenarios

import (
	"path/filepath"
	"sort"
	"testing"
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
}

// featuresOf lists the features a scenario uses.
func featuresOf(s *Scenario) map[string]bool {
	used := map[string]bool{}
	set := func(name string, on bool) {
		if on {
			used[name] = true
		}
	}
	p := s.Proxy
	set("syncCost.fixed", p.SyncCost.Fixed != 0)
	set("syncCost.perService", p.SyncCost.PerService != 0)
	set("syncCost.perEndpoint", p.SyncCost.PerEndpoint != 0)
	set("configSyncPeriod", p.ConfigSyncPeriod != nil)
	set("retryInterval", p.RetryInterval != nil)
	for _, st := range s.Timeline {
		set("apply", st.Apply != nil)
		set("update", st.Update != nil)
		set("delete", st.Delete != nil)
		set("patch.merge", st.Patch != nil && st.Patch.Merge != nil)
		set("patch.endpoint", st.Patch != nil && st.Patch.Endpoint != "")
		set("churn", st.Churn != nil)
		set("restart", st.Restart)
		set("fault.dataplaneOps", st.Fault != nil && st.Fault.DataplaneOps > 0)
		set("fault.watchBreak", st.Fault != nil && st.Fault.WatchBreak != nil)
		set("connect", st.Connect != nil)
		set("close", st.Close != nil)
		e := st.Expect
		if e == nil {
			continue
		}
		set("within", e.Within != nil)
		if sy := e.Syncs; sy != nil {
			set("syncs.count", sy.Count != nil)
			set("syncs.atLeast", sy.AtLeast != nil)
			set("syncs.atMost", sy.AtMost != nil)
			set("syncs.at", sy.At != nil)
			set("syncs.between", sy.Between != nil)
		}
		if c := e.DataplaneOps; c != nil {
			set("dataplaneOps.count", c.Count != nil)
			set("dataplaneOps.atLeast", c.AtLeast != nil)
			set("dataplaneOps.atMost", c.AtMost != nil)
			set("dataplaneOps.between", c.Between != nil)
		}
		if l := e.Latency; l != nil {
			set("latency.exact", l.Exact != nil)
			set("latency.max", l.Max != nil)
		}
		set("ipvs", e.IPVS != nil)
		set("ipvsFile", e.IPVSFile != "")
		set("draining", e.Draining != nil)
		set("addresses", e.Addresses != nil)
		set("sysctls", len(e.Sysctls) > 0)
		for _, c := range e.Connections {
			set("connections.result", c.Result != "")
			set("connections.server", c.Server != "")
			set("connections.state", c.State != "")
			set("connections.latencyAtLeast", c.LatencyAtLeast != nil)
			set("connections.latencyAtMost", c.LatencyAtMost != nil)
		}
	}
	return used
}

// Every feature is used by a scenario that must pass (the library or
// testdata/features) and by one that must fail (testdata/failing), so that
// switching the feature off turns a test red.
func TestEveryFeatureHasAPassingAndAFailingScenario(t *testing.T) {
	passing := map[string]bool{}
	for _, name := range LibraryNames() {
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
