package replay

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim"
)

// profileScenario is equivalenceScenario costed by the default cost
// profile (the second pool adding a fixed cost), with services Services:
// past 1,000 endpoints the iptables proxier is in large-cluster mode
// (comments dropped, stale chains cleaned up once per syncPeriod). delay
// gives the first pool's other node a watch delay.
func profileScenario(mode, materialize string, services int, delay string) string {
	return profileChurnScenario(mode, materialize, services, delay, 0)
}

// profileChurnScenario adds cluster.churn at rate writes per second from
// 10s to 3m (none for 0): readiness flaps, pod restarts, rolling updates,
// scaling, and Services deleted and created again.
func profileChurnScenario(mode, materialize string, services int, delay string, rate int) string {
	s := equivalenceScenario(mode, materialize)
	if rate > 0 {
		s = strings.Replace(s, "    pods: true\n", fmt.Sprintf(`    pods: true
  churn:
    seed: 3
    rate: %d
    from: 10s
    until: 3m
    processes: {readinessFlaps: 30%%, podRestarts: 15%%, rollingUpdates: 30%%, scaling: 15%%, services: 10%%}
`, rate), 1)
		// The churn's pods and Services come and go: keep the timeline's
		// restarts and failed syncs only.
		var kept []string
		for _, l := range strings.Split(s, "\n") {
			if !strings.Contains(l, "podReady:") && !strings.Contains(l, "patch:") {
				kept = append(kept, l)
			}
		}
		s = strings.Join(kept, "\n")
	}
	for _, r := range [][2]string{
		{"syncCost: {fixed: 150ms, perEndpoint: 3ms}", "syncCost: {profile: default}"},
		{"syncCost: {fixed: 300ms, perService: 1ms}", "syncCost: {profile: default, fixed: 30ms}"},
		{"services: 40", fmt.Sprintf("services: %d", services)},
		{"syncJitter: 400ms", "syncJitter: 400ms\n      watchDelay: {min: 0s, max: " + delay + "}"},
	} {
		if !strings.Contains(s, r[0]) {
			panic("profileScenario: no " + r[0])
		}
		s = strings.Replace(s, r[0], r[1], 1)
	}
	return s
}

// A light node costed by a profile: every sync's work (full or partial,
// the payload's sections, what iptables-save read, the table's rules),
// hence its cost, is what the node's materialised self reports, in the
// same cluster (watch delays, restarts, failed syncs, CPU speeds), in and
// out of large-cluster mode.
func TestLightNodeWorkIsMaterialisedWork(t *testing.T) {
	testLightNodeWork(t, "iptables", []lightWorkCase{
		{"small", 40, "0s", 0, nil},
		{"small-delayed", 40, "900ms", 0, nil},
		{"large-delayed", 260, "700ms", 0, nil},
		// Over 1,024 events: the Service state log is trimmed under way.
		{"churn-delayed", 120, "500ms", 8, nil},
	})
}

// The same in nftables mode: every sync's transactions, operations by verb
// and object, chains rewritten, stale chains flushed and deleted, and
// listings (hence its cost) are the materialised node's. The delays make
// syncs less and more than a second apart (stale chains wait, or are
// flushed again); the churn deletes and creates Services and endpoints.
func TestNFTablesLightNodeWorkIsMaterialisedWork(t *testing.T) {
	testLightNodeWork(t, "nftables", []lightWorkCase{
		{"small", 40, "0s", 0, nil},
		{"small-delayed", 40, "900ms", 0, nil},
		{"churn-delayed", 120, "500ms", 8, nil},
		// ClientIP affinity (endpoint chains, affinity sets created and
		// deleted), LoadBalancer Services and two ports a Service.
		{"churn-affinity", 80, "300ms", 8, func(s string) string {
			return strings.Replace(strings.Replace(s,
				"    types: {ClusterIP: 70%, NodePort: 30%}\n",
				"    types: {ClusterIP: 40%, NodePort: 30%, LoadBalancer: 30%}\n    sessionAffinity: {ClientIP: 50%, None: 50%}\n    ports: {1: 50%, 2: 50%}\n", 1),
				"syncJitter: 100ms", "syncJitter: 100ms\n      watchDelay: {min: 0s, max: 1500ms}", 1)
		}},
	})
}

type lightWorkCase struct {
	name     string
	services int
	delay    string
	churn    int
	// edit, if set, changes the scenario.
	edit func(string) string
}

func testLightNodeWork(t *testing.T, mode string, cases []lightWorkCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var runs [2][][]sim.SyncRecord
			var res [2]*Result
			for i, mat := range []string{"false", "true"} {
				src := profileChurnScenario(mode, mat, c.services, c.delay, c.churn)
				if c.edit != nil {
					if src = c.edit(src); !strings.Contains(src, "sessionAffinity: {ClientIP") {
						t.Fatal("the case's edit did not apply")
					}
				}
				s, err := scenarios.Parse("profile.yaml", []byte(src), nil)
				if err != nil {
					t.Fatal(err)
				}
				r, err := Replay(s, Options{KeepNodes: true})
				if err != nil {
					t.Fatal(err)
				}
				if !r.Passed() {
					t.Fatalf("replay failed: %v", r.Failures)
				}
				res[i] = r
				for _, nr := range r.Cluster.Nodes {
					runs[i] = append(runs[i], nr.Runs)
				}
			}
			full, partial, large, saves := 0, 0, 0, 0
			flushed, deleted, elements, affinityDeleted := 0, 0, 0, 0
			for k, nr := range res[0].Cluster.Nodes {
				where := fmt.Sprintf("%s, node %s", c.name, nr.Name)
				other := res[1].Cluster.Nodes[k]
				compareRuns(t, where, runs[0][k], runs[1][k], true)
				if !reflect.DeepEqual(nr.Programming, other.Programming) {
					t.Errorf("%s: samples differ from the materialised node's: %s", where, firstDiff(nr.Programming, other.Programming))
				}
				if !reflect.DeepEqual(nr.PodLatencies, other.PodLatencies) {
					t.Errorf("%s: pod latencies differ from the materialised node's", where)
				}
				for _, r := range nr.Runs {
					if r.Work.Mode() != mode {
						continue
					}
					if r.Work.Full {
						full++
					} else {
						partial++
					}
					if w := r.Work.IPTables; w != nil {
						if w.TableRules > 0 && r.Work.Endpoints > 1000 {
							large++
						}
						saves += w.Saves
					}
					if w := r.Work.NFTables; w != nil {
						flushed += w.StaleChainsFlushed
						deleted += w.StaleChainsDeleted
						elements += w.ElementsAdded() + w.ElementsDeleted()
						affinityDeleted += w.Ops[sim.NFTDelete][sim.NFTSet]
					}
				}
			}
			t.Logf("%s %s: %d full and %d partial syncs with work (%d in large-cluster mode), %d saves; %d stale chains flushed, %d deleted, %d elements added or deleted, %d affinity sets deleted",
				mode, c.name, full, partial, large, saves, flushed, deleted, elements, affinityDeleted)
			if full < 5 || partial < 50 {
				t.Errorf("%s: %d full and %d partial syncs: the case exercises too little", c.name, full, partial)
			}
			if mode == "iptables" && (c.services > 200) != (large > 0) {
				t.Errorf("%s: %d syncs in large-cluster mode", c.name, large)
			}
			if mode == "nftables" && (elements == 0 || (c.churn > 0 && (flushed == 0 || deleted == 0)) || (c.edit != nil && affinityDeleted == 0)) {
				t.Errorf("%s: %d elements changed, %d stale chains flushed, %d deleted, %d affinity sets deleted: the case exercises too little", c.name, elements, flushed, deleted, affinityDeleted)
			}
		})
	}
}

// The invariant with a profile: each light node's syncs (their work and
// cost), samples and pod latencies are its single-node replay's.
func TestProfiledLightNodeIsItsSingleNodeReplay(t *testing.T) {
	s, err := scenarios.Parse("profile.yaml", []byte(profileScenario("iptables", "false", 260, "0s")), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Replay(s, Options{KeepNodes: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed() {
		t.Fatalf("cluster replay failed: %v", res.Failures)
	}
	for _, nr := range res.Cluster.Nodes[1:] {
		one, err := s.NodeScenario(nr.Name)
		if err != nil {
			t.Fatal(err)
		}
		var sw *sim.World
		single, err := Replay(one, Options{World: func(w *sim.World) error { sw = w; return nil }})
		if err != nil {
			t.Fatal(err)
		}
		where := "node " + nr.Name
		compareRuns(t, where, nr.Runs, single.Runs, true)
		if !reflect.DeepEqual(nr.Programming, single.Programming) {
			t.Errorf("%s: samples differ from its replay alone: %s", where, firstDiff(nr.Programming, single.Programming))
		}
		if pods := sw.PodLatencies(); !reflect.DeepEqual(nr.PodLatencies, pods) || len(pods) < 10 {
			t.Errorf("%s: pod latencies in the cluster %v, alone %v", where, nr.PodLatencies, pods)
		}
		costed := 0
		for _, r := range nr.Runs {
			if r.Split.By != "" && r.End-r.Start > r.Split.Write {
				costed++
			}
		}
		if costed < 20 {
			t.Errorf("%s: only %d syncs costed by the profile", where, costed)
		}
	}
}

// A light node of a mode that computes no work (IPVS) refuses a profile,
// naming the node and what to do.
func TestLightNodeProfileRefusedWithoutWork(t *testing.T) {
	for _, mode := range []string{"ipvs"} {
		src := profileScenario(mode, "false", 40, "0s")
		if mode == "ipvs" {
			src = strings.Replace(src, "syncCost: {profile: default}", "syncCost: {fixed: 1ms}", 1)
			src = strings.Replace(src, "syncCost: {profile: default, fixed: 30ms}", "syncCost: {profile: default, fixed: 30ms}", 1)
		}
		s, err := scenarios.Parse("profile.yaml", []byte(src), nil)
		if err != nil {
			if mode == "ipvs" && strings.Contains(err.Error(), "ipvs") {
				continue // the default profile has no IPVS part: refused at load
			}
			t.Fatal(err)
		}
		_, err = Replay(s, Options{})
		if err == nil || !strings.Contains(err.Error(), "node-00") || !strings.Contains(err.Error(), "materialise") {
			t.Errorf("%s: light nodes with a profile: got %v, want a refusal naming the node and materialising", mode, err)
		}
	}
}

// Two Services holding one frontend (an external IP and port) share an
// nftables element, which a light node cannot attribute: it refuses,
// naming them, where the materialised nodes replay the scenario.
func TestNFTablesLightNodeRefusesSharedFrontend(t *testing.T) {
	for _, mat := range []string{"true", "false"} {
		src := profileScenario("nftables", mat, 40, "0s")
		const at = "  - {at: 16m, note:"
		if !strings.Contains(src, at) {
			t.Fatal("no step to insert before")
		}
		src = strings.Replace(src, at, `  - {at: 15m50s, patch: {kind: Service, namespace: gen, name: svc-00001, merge: {spec: {externalIPs: [203.0.113.7]}}}}
  - {at: 15m51s, patch: {kind: Service, namespace: gen, name: svc-00002, merge: {spec: {externalIPs: [203.0.113.7]}}}}
`+at, 1)
		s, err := scenarios.Parse("profile.yaml", []byte(src), nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Replay(s, Options{})
		if mat == "true" {
			if err != nil || !res.Passed() {
				t.Fatalf("materialised: %v %v", err, res.Failures)
			}
			continue
		}
		msg := fmt.Sprint(err)
		if err == nil {
			msg = fmt.Sprint(res.Failures)
		}
		t.Log(msg)
		if !strings.Contains(msg, "gen/svc-00001 and gen/svc-00002 both hold 203.0.113.7/TCP/80") || !strings.Contains(msg, "materialise") {
			t.Errorf("light nodes with a shared frontend: got %s, want a refusal naming both Services", msg)
		}
	}
}
