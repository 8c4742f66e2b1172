package replay

import (
	"reflect"
	"testing"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/sim"
)

// podAwayScenario: a pod turns ready and the slices show it, then its
// Service's selector moves away before the nodes' next sync (minSyncPeriod
// 10s) and comes back later. kube-proxy programs the pod only once the
// slices show it again: a sync carries a pod change when, at its start,
// the slices it has heard show it (World.programmingStart).
const podAwayScenario = `name: pod-latency-service-away
proxy: {mode: iptables, version: v1.36.0, minSyncPeriod: 10s, syncPeriod: 30s, syncCost: {fixed: 150ms}}
controllers: {endpointSlice: {batchPeriod: 500ms}}
cluster:
  seed: 5
  pools:
    - {name: a, count: 3, zone: zone-a, syncJitter: 2s}
  generate: {seed: 3, services: 6, endpointsPerService: {3: 100%}, types: {ClusterIP: 100%}, pods: true}
timeline:
  - {at: 2s, podReady: {namespace: gen, name: svc-00002-0, ready: false}}
  - {at: 2s, podReady: {namespace: gen, name: svc-00003-1, ready: false}}
  - {at: 21s, podReady: {namespace: gen, name: svc-00002-0, ready: true}}
  - {at: 21s, podReady: {namespace: gen, name: svc-00003-1, ready: true}}
  - {at: 22s, patch: {kind: Service, namespace: gen, name: svc-00002, merge: {spec: {selector: {app: nowhere}}}}}
  - {at: 45s, patch: {kind: Service, namespace: gen, name: svc-00002, merge: {spec: {selector: {app: svc-00002}}}}}
  - {at: 46s, podReady: {namespace: gen, name: svc-00002-1, ready: false}}
  - {at: 47s, patch: {kind: Service, namespace: gen, name: svc-00002, merge: {spec: {selector: {app: nowhere}}}}}
  - {at: 70s, patch: {kind: Service, namespace: gen, name: svc-00002, merge: {spec: {selector: {app: svc-00002}}}}}
  - {at: 2m, note: end}
`

// A light node's pod latencies are its single-node replay's when the
// slices stop showing a pod change before the node programs it, and show
// it again later.
func TestClusterPodLatencyWhenSlicesGoAway(t *testing.T) {
	s, err := scenarios.Parse("pod-away.yaml", []byte(podAwayScenario), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Replay(s, Options{KeepNodes: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Cluster == nil || len(res.Cluster.Nodes) != 3 {
		t.Fatalf("no cluster of 3 nodes: %+v", res.Cluster)
	}
	for _, nr := range res.Cluster.Nodes {
		one, err := s.NodeScenario(nr.Name)
		if err != nil {
			t.Fatal(err)
		}
		var sw *sim.World
		if _, err := Replay(one, Options{World: func(w *sim.World) error { sw = w; return nil }}); err != nil {
			t.Fatal(err)
		}
		want := sw.PodLatencies()
		t.Logf("%s: pod latencies %v (alone %v)", nr.Name, nr.PodLatencies, want)
		if !reflect.DeepEqual(nr.PodLatencies, want) {
			t.Errorf("%s: pod latencies in the cluster %v, alone %v", nr.Name, nr.PodLatencies, want)
		}
		if len(want) < 3 {
			t.Errorf("%s: only %d pod latencies: the scenario exercises too little", nr.Name, len(want))
		}
	}
}
