package iptablesmode_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/bubble"
	"github.com/proxysim/proxysim/scenarios/iptablesmode"
	"github.com/proxysim/proxysim/scenarios/replay"
)

const ownScenario = `
name: own-iptables
proxy:
  mode: iptables
  version: v1.36.0
  nodeIPs: [192.168.0.2]
objects:
  - apiVersion: v1
    kind: Service
    metadata: {name: web, namespace: default}
    spec:
      clusterIP: 10.96.0.10
      ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]
  - apiVersion: discovery.k8s.io/v1
    kind: EndpointSlice
    metadata: {name: web-abc, namespace: default, labels: {kubernetes.io/service-name: web}}
    addressType: IPv4
    ports: [{name: http, port: 8080, protocol: TCP}]
    endpoints:
      - {addresses: [10.244.1.2], nodeName: node-a}
      - {addresses: [10.244.2.3], nodeName: node-b}
timeline:
  - at: 1s
    expect:
      dataplaneOps: {count: 1}
      route:
        from: 10.244.9.9
        to: 10.96.0.10:80
        shares: {10.244.1.2:8080: 1/2, 10.244.2.3:8080: 1/2}
`

// kubeProxyRules is what proxysim's model of kube-proxy wrote for the
// scenario, as iptables-save prints it.
func kubeProxyRules(t *testing.T, s *scenarios.Scenario) string {
	t.Helper()
	var dp scenarios.Dataplane
	res, err := replay.Replay(s, replay.Options{Dataplane: func(s *scenarios.Scenario, clk clock.PassiveClock) (scenarios.Dataplane, error) {
		d, err := iptablesmode.Mode{}.Fake(s, clk)
		dp = d
		return d, err
	}})
	if err != nil || !res.Passed() {
		t.Fatalf("the model: %v %v", err, res.Failures)
	}
	out, err := dp.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A proxy under test programs the in-memory iptables through the restore
// interface it is given: here one restore of kube-proxy's own rules, so
// routes, the count of its writes and the comparison all agree, and a
// payload the fake refuses fails the route.
func TestOwnProxyOnIPTables(t *testing.T) {
	s, err := scenarios.Parse("own.yaml", []byte(ownScenario), nil)
	if err != nil {
		t.Fatal(err)
	}
	rules := kubeProxyRules(t, s)
	restore := func(payload string) bubble.ProxyFunc {
		return func(ctx context.Context, env bubble.ProxyEnv) error {
			_ = env.IPTables.Restore(payload)
			<-ctx.Done()
			return nil
		}
	}
	res, err := bubble.Replay(t, s, restore(rules), bubble.Options{Compare: bubble.CompareKubeProxy})
	if err != nil {
		t.Fatal(err)
	}
	if report := res.Report(); !res.Passed() || res.Checks != 1 || res.Compare.Differs() || len(res.Writes) != 1 {
		t.Fatalf("want a pass with one write and no difference:\n%s", report)
	}
	res, err = bubble.Replay(t, s, restore("*nat\nCOMMIT\n"), bubble.Options{Compare: bubble.CompareKubeProxy})
	if err != nil {
		t.Fatal(err)
	}
	report := res.Report()
	if res.Passed() || !strings.Contains(report, "timeline[0].expect.route at 1s") ||
		!strings.Contains(report, "route TCP 10.96.0.10:80 from 10.244.9.9: proxy {ACCEPT: 1}, kube-proxy {10.244.1.2:8080: 1/2, 10.244.2.3:8080: 1/2}") {
		t.Fatalf("want the route to fail, compared with kube-proxy's:\n%s", report)
	}
}
