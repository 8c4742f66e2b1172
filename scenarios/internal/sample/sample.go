// Package sample writes the scenarios that the scenario packages' tests
// and benchmarks share (a generated cluster, a churned one, a large cluster
// dump), as text or files, so that the format's tests and the replay's
// read the same ones.
package sample

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ChurnScenario is a cluster of three nodes and 200 generated Services
// whose cluster.churn is churn (indented under it), with seed.
func ChurnScenario(seed int, churn string) string {
	return fmt.Sprintf(`name: churn-gen
proxy: {mode: iptables, version: v1.36.0, minSyncPeriod: 1s, syncPeriod: 30s, syncCost: {fixed: 100ms, perEndpoint: 1ms}}
controllers:
  endpointSlice: {batchPeriod: 1s}
cluster:
  seed: 1
  pools:
    - {name: main, count: 3, zone: zone-a}
  generate:
    seed: 2
    services: 200
    endpointsPerService: {3: 50%%, 6: 50%%}
    pods: true
  churn:
    seed: %d
%stimeline:
  - {at: 5m, expect: {cluster: {syncs: {atLeast: 2}}}}
`, seed, churn)
}

// ChurnDefault is a churn of 10 writes a second from 5s.
const ChurnDefault = "    rate: 10\n    from: 5s\n"

// GeneratedScenario is a small story at a generated cluster of services
// Services × 10 endpoints on 100 nodes: one Service changes, then one
// endpoint.
func GeneratedScenario(mode string, services int) string {
	return fmt.Sprintf(`name: generated-%s-%d
proxy: {version: v1.34.0, mode: %s, nodeName: node-000, minSyncPeriod: 1s}
cluster:
  generate:
    seed: 1
    services: %d
    endpointsPerService: 10
    nodes: 100
    types: {ClusterIP: 90%%, NodePort: 5%%, LoadBalancer: 5%%}
timeline:
  - at: 1s
    patch: {kind: Service, namespace: gen, name: svc-00042, merge: {spec: {sessionAffinity: ClientIP}}}
  - at: 3s
    patch: {kind: EndpointSlice, namespace: gen, name: svc-00007-0, endpoint: 10.128.0.71, conditions: {ready: false, serving: false}}
  - at: 5s
    expect: {syncs: {count: 3}}
`, mode, services, mode, services)
}

// BenchServices is the size of the generated benchmarks' cluster:
// PROXYSIM_BENCH_SERVICES, or 20,000.
func BenchServices() int {
	if n, err := strconv.Atoi(os.Getenv("PROXYSIM_BENCH_SERVICES")); err == nil && n > 0 {
		return n
	}
	return 20000
}

// WriteClusterDump writes a scenario whose objects come from a cluster dump
// of services Services, each with an EndpointSlice of perService endpoints,
// in the layout `kubectl get -o yaml` prints, and returns the scenario's
// path and the dump's size.
func WriteClusterDump(tb testing.TB, dir string, services, perService int) (string, int64) {
	tb.Helper()
	var b strings.Builder
	for i := range services {
		ns := fmt.Sprintf("ns-%d", i%50)
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-%d\n  namespace: %s\n  labels:\n    app: svc-%d\nspec:\n  type: ClusterIP\n  clusterIP: 10.%d.%d.%d\n  ports:\n  - name: http\n    port: 80\n    protocol: TCP\n    targetPort: 8080\n---\n",
			i, ns, i, 96+i/65536, (i/256)%256, i%256)
		fmt.Fprintf(&b, "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: svc-%d-x7k2p\n  namespace: %s\n  labels:\n    kubernetes.io/service-name: svc-%d\naddressType: IPv4\nports:\n- name: http\n  port: 8080\n  protocol: TCP\nendpoints:\n", i, ns, i)
		for j := range perService {
			n := i*perService + j
			fmt.Fprintf(&b, "- addresses:\n  - 10.%d.%d.%d\n  conditions:\n    ready: true\n  nodeName: node-%d\n", 128+n/65536, (n/256)%256, n%256, j%20)
		}
		b.WriteString("---\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), []byte(b.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	scenario := filepath.Join(dir, "large.yaml")
	src := "name: large\nproxy: {version: v1.34.0}\nobjects:\n  - file: cluster.yaml\ntimeline:\n  - at: 1s\n    expect: {syncs: {count: 1}}\n"
	if err := os.WriteFile(scenario, []byte(src), 0o644); err != nil {
		tb.Fatal(err)
	}
	return scenario, int64(b.Len())
}
