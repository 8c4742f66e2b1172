package scenarios

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// Bad cluster.generate input is refused at load, at the field, all at once.
func TestGeneratedClusterRefusesBadInput(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"negative services", `
name: x
proxy: {version: v1.34.0}
cluster:
  generate: {services: -3}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:5:24: cluster.generate.services: want 0 to 1000000 Services, got -3"},
		{"no services", `
name: x
proxy: {version: v1.34.0}
cluster:
  generate: {seed: 1}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:5:13: cluster.generate.services: required: how many Services to generate"},
		{"negative endpoints", `
name: x
proxy: {version: v1.34.0}
cluster:
  generate: {services: 3, endpointsPerService: -1}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:5:48: cluster.generate.endpointsPerService: must not be negative, got -1"},
		{"a negative count in a distribution", `
name: x
proxy: {version: v1.34.0}
cluster:
  generate:
    services: 3
    endpointsPerService: {1: 50%, -2: 50%}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:7:35: cluster.generate.endpointsPerService.-2: must not be negative, got -2"},
		{"one count written twice", `
name: x
proxy: {version: v1.34.0}
cluster:
  generate:
    services: 3
    ports: {1: 50%, 01: 50%}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:7:21: cluster.generate.ports.01: \"01\" given twice"},
		{"percentages short of 100%", `
name: x
proxy: {version: v1.34.0}
cluster:
  generate:
    services: 3
    endpointsPerService: {1: 50%, 2: 30%, 10: 15%}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:7:26: cluster.generate.endpointsPerService: percentages add up to 95%, not 100%"},
		{"percentages over 100%", `
name: x
proxy: {version: v1.34.0}
cluster:
  generate:
    services: 3
    types: {ClusterIP: 90%, NodePort: 10.5%}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:7:12: cluster.generate.types: percentages add up to 100.5%, not 100%"},
		{"a share that is not a percentage", `
name: x
proxy: {version: v1.34.0}
cluster:
  generate:
    services: 3
    protocols: {TCP: 0.9}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:7:22: cluster.generate.protocols.TCP: want a percentage such as 50% or 12.5%, got \"0.9\""},
		{"an unknown type", `
name: x
proxy: {version: v1.34.0}
cluster:
  generate:
    services: 3
    types: {ClusterIP: 90%, NodePrt: 10%}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:7:29: cluster.generate.types.NodePrt: want ClusterIP, NodePort or LoadBalancer, got NodePrt"},
		{"an unknown key", `
name: x
proxy: {version: v1.34.0}
cluster:
  generate:
    services: 3
    endpointsPerServce: 2
timeline:
  - {at: 1s, run: true}
`, "x.yaml:7:5: cluster.generate.endpointsPerServce: unknown field \"endpointsPerServce\" (did you mean \"endpointsPerService\"?)"},
		{"an unknown key beside generate", `
name: x
proxy: {version: v1.34.0}
cluster:
  generated: {services: 3}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:5:3: cluster.generated: unknown field \"generated\" (did you mean \"generate\"?)"},
		{"nothing to generate", `
name: x
proxy: {version: v1.34.0}
cluster: {}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:4:10: cluster.generate: say how to make the cluster"},
		{"overlapping CIDRs", `
name: x
proxy: {version: v1.34.0}
cluster:
  generate: {services: 3, podCIDR: 10.96.0.0/16}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:5:36: cluster.generate.podCIDR: 10.96.0.0/16 overlaps serviceCIDR 10.96.0.0/12: addresses would collide"},
		{"node ports run out", `
name: x
proxy: {version: v1.34.0}
cluster:
  generate: {services: 3, types: {NodePort: 100%}, nodePortRange: 30000-30001}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:5:67: cluster.generate.nodePortRange: 30000-30001 holds 2 ports; the NodePort and LoadBalancer Services need 3"},
		{"zero nodes", `
name: x
proxy: {version: v1.34.0}
cluster:
  generate: {services: 3, nodes: 0}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:5:34: cluster.generate.nodes: want at least 1, got 0"},
		{"pods without a controller", `
name: x
proxy: {version: v1.34.0}
cluster:
  generate: {services: 3, pods: true}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:5:33: cluster.generate.pods: generated Pods need controllers: {endpointSlice: {}} to write their slices"},
		{"terminating pods", `
name: x
proxy: {version: v1.34.0}
controllers: {endpointSlice: {}}
cluster:
  generate: {services: 3, pods: true, conditions: {ready: 50%, terminating: 50%}}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:6:64: cluster.generate.conditions.terminating: a generated Pod cannot be terminating"},
		{"a listed object that is generated too", `
name: x
proxy: {version: v1.34.0}
cluster:
  generate: {services: 3}
objects:
  - apiVersion: v1
    kind: Service
    metadata: {name: svc-00001, namespace: gen}
    spec: {clusterIP: 10.0.0.1, ports: [{port: 80}]}
timeline:
  - {at: 1s, run: true}
`, "x.yaml:7:5: objects[0]: Service gen/svc-00001 is defined twice"},
		{"a step on a generated object that does not exist", `
name: x
proxy: {version: v1.34.0}
cluster:
  generate: {services: 3}
timeline:
  - {at: 1s, delete: {kind: Service, namespace: gen, name: svc-00003}}
`, "x.yaml:7:60: timeline[0].delete.name: no Service gen/svc-00003 at this point in the timeline"},
		{"a patched endpoint the generated slice does not have", `
name: x
proxy: {version: v1.34.0}
cluster:
  generate: {services: 3}
timeline:
  - {at: 1s, patch: {kind: EndpointSlice, namespace: gen, name: svc-00000-0, endpoint: 10.128.0.9, conditions: {ready: false}}}
`, "x.yaml:7:88: timeline[0].patch.endpoint: EndpointSlice gen/svc-00000-0 has no endpoint 10.128.0.9 at this point"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(c.yaml), nil)
			if err == nil {
				t.Fatal("loaded")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got:\n%v\nwant:\n%s", err, c.want)
			}
		})
	}
}

// Every problem at once: the file's own and the generator's.
func TestGeneratedClusterReportsEveryProblem(t *testing.T) {
	_, err := Parse("x.yaml", []byte(`name: x
proxy: {version: v1.34.0}
cluster:
  generate:
    services: -3
    types: {ClusterIP: 90%, NodePrt: 10%}
    ports: {1: 60%}
timeline:
  - {at: 1s, run: true}
`), nil)
	want := `x.yaml:5:15: cluster.generate.services: want 0 to 1000000 Services, got -3
x.yaml:6:29: cluster.generate.types.NodePrt: want ClusterIP, NodePort or LoadBalancer, got NodePrt
x.yaml:7:12: cluster.generate.ports: percentages add up to 60%, not 100%`
	if err == nil || err.Error() != want {
		t.Fatalf("got:\n%v\nwant:\n%s", err, want)
	}
}

const everyMix = `name: x
proxy: {version: v1.34.0}
CONTROLLERS
cluster:
  generate:
    seed: 3
    services: 200
    endpointsPerService: {0: 5%, 1: 45%, 3: 30%, 120: 20%}
    ports: {1: 60%, 2: 30%, 4: 10%}
    protocols: {TCP: 80%, UDP: 15%, SCTP: 5%}
    types: {ClusterIP: 60%, NodePort: 20%, LoadBalancer: 20%}
    externalTrafficPolicy: {Cluster: 50%, Local: 50%}
    internalTrafficPolicy: {Cluster: 80%, Local: 20%}
    sessionAffinity: {None: 70%, ClientIP: 30%}
    conditions: CONDITIONS
    nodes: 7
    zones: 2
    pods: PODS
timeline:
  - {at: 1s, run: true}
`

func everyMixScenario(t *testing.T, pods bool) *Scenario {
	t.Helper()
	src := strings.NewReplacer("CONTROLLERS", "", "PODS", "false", "CONDITIONS", "{ready: 70%, notReady: 10%, terminating: 10%, servingTerminating: 10%}").Replace(everyMix)
	if pods {
		src = strings.NewReplacer("CONTROLLERS", "controllers: {endpointSlice: {}}", "PODS", "true", "CONDITIONS", "{ready: 70%, notReady: 30%}").Replace(everyMix)
	}
	s, err := Parse("x.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// What the generator makes passes the API server's rules as the loader
// applies them to listed objects, and needs none of its defaults.
func TestGeneratedObjectsPassTheAPIServersRules(t *testing.T) {
	for _, pods := range []bool{false, true} {
		s := everyMixScenario(t, pods)
		kinds := map[string]int{}
		for _, o := range s.Initial {
			kinds[o.Kind]++
			cp := o.Obj.DeepCopyObject()
			key, errs, ok := DefaultAndValidate(cp)
			if !ok || len(errs) > 0 || key != o.Key {
				t.Fatalf("%s: %v (key %s)", o.Key, errs, key)
			}
			if !apiequality.Semantic.DeepEqual(cp, o.Obj) {
				t.Errorf("%s: the API server's defaults change it", o.Key)
			}
		}
		if kinds["Service"] != 200 || kinds["Node"] != 7 || (pods && kinds["Pod"] == 0) || (!pods && kinds["EndpointSlice"] < 200) {
			t.Errorf("pods=%v: %v", pods, kinds)
		}
	}
}

// One file gives the same objects on every load.
func TestGeneratedClusterLoadsTheSameObjects(t *testing.T) {
	enc := func(s *Scenario) []byte {
		var b bytes.Buffer
		for _, o := range s.Initial {
			if err := json.NewEncoder(&b).Encode([]any{o.Key, o.Obj}); err != nil {
				t.Fatal(err)
			}
		}
		return b.Bytes()
	}
	a, b := enc(everyMixScenario(t, false)), enc(everyMixScenario(t, false))
	if !bytes.Equal(a, b) {
		t.Fatal("two loads of one scenario differ")
	}
	objs := everyMixScenario(t, false).Initial
	if objs[0].Pos.Path != "cluster.generate" || objs[0].Pos.Line != 6 {
		t.Errorf("generated objects are placed at %+v", objs[0].Pos)
	}
}
