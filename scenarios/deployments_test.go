package scenarios

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// deploymentsScenario is ClusterLoader2's load-test shape in small: 3
// namespaces of 20 small, 3 medium and 1 big Deployment, half of each size
// (rounded up) behind a Service, with churn over all of them.
const deploymentsScenario = `name: deps
proxy: {mode: iptables, version: v1.36.0, minSyncPeriod: 1s, syncPeriod: 30s}
controllers:
  endpointSlice: {batchPeriod: 1s}
cluster:
  seed: 1
  pools:
    - {name: main, count: 6, zone: zone-a}
  generate:
    seed: 2
    namespaces: 3
    deployments: {5: 20, 30: 3, 100: 1}
    withService: 50%
    types: {ClusterIP: 70%, NodePort: 20%, LoadBalancer: 10%}
    externalTrafficPolicy: {Cluster: 50%, Local: 50%}
  churn:
    seed: 3
    rate: 8
    from: 5s
timeline:
  - {at: 3m, expect: {cluster: {syncs: {atLeast: 2}}}}
`

func TestGeneratedDeploymentsLoad(t *testing.T) {
	s, err := Parse("deps.yaml", []byte(deploymentsScenario), nil)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	services := map[string]int{}
	for _, o := range s.Initial {
		kinds[o.Kind]++
		if svc, ok := o.Obj.(*v1.Service); ok {
			services[svc.Namespace]++
		}
		cp := o.Obj.DeepCopyObject()
		if key, errs, ok := DefaultAndValidate(cp); !ok || len(errs) > 0 || key != o.Key {
			t.Fatalf("%s: %v (key %s)", o.Key, errs, key)
		}
		if !apiequality.Semantic.DeepEqual(cp, o.Obj) {
			t.Errorf("%s: the API server's defaults change it", o.Key)
		}
	}
	if kinds["Pod"] != 3*(100+90+100) || kinds["Service"] != 3*(10+2+1) || kinds["Node"] != 6 {
		t.Errorf("objects %v, want 870 Pods, 39 Services, 6 Nodes", kinds)
	}
	for _, ns := range []string{"gen-000", "gen-001", "gen-002"} {
		if services[ns] != 13 {
			t.Errorf("%s: %d Services, want 13", ns, services[ns])
		}
	}
}

// The churn acts on the Deployments of every namespace, those without a
// Service included: each process in several namespaces, and Services
// deleted are generated ones.
func TestChurnTouchesEveryNamespace(t *testing.T) {
	s, err := Parse("deps.yaml", []byte(deploymentsScenario), nil)
	if err != nil {
		t.Fatal(err)
	}
	fronted := map[string]bool{}
	for _, o := range s.Initial {
		if svc, ok := o.Obj.(*v1.Service); ok {
			fronted[svc.Namespace+"/"+svc.Name] = true
		}
	}
	// Each kind of step: the namespaces it acted in.
	kinds := map[string]map[string]bool{}
	seen := func(kind, ns string) {
		if kinds[kind] == nil {
			kinds[kind] = map[string]bool{}
		}
		kinds[kind][ns] = true
	}
	bare := 0
	for _, st := range s.Timeline {
		for _, a := range st.Actions {
			var ns, pod string
			switch a := a.(type) {
			case *PodReadyStep:
				ns, pod = a.PodReady.Namespace, a.PodReady.Name
				seen("podReady", ns)
			case *RolloutStep:
				ns, pod = a.RollingUpdate.Namespace, a.RollingUpdate.From+"-0"
				seen("rollingUpdate", ns)
			case *CreateStep:
				for _, o := range a.Objects {
					seen("create "+o.Kind, o.Obj.(interface{ GetNamespace() string }).GetNamespace())
				}
				continue
			case *DeleteStep:
				seen("delete "+a.Delete.Kind, a.Delete.Namespace)
				if a.Delete.Kind == "Service" && !fronted[a.Delete.Namespace+"/"+a.Delete.Name] {
					t.Errorf("deleted Service %s/%s, not generated", a.Delete.Namespace, a.Delete.Name)
				}
				ns, pod = a.Delete.Namespace, a.Delete.Name
				if a.Delete.Kind != "Pod" {
					continue
				}
			default:
				continue
			}
			// dep-00013-4, or dep-00013-v2-4 after a rolling update
			if dep := pod[:len("dep-00000")]; !fronted[ns+"/"+dep] {
				bare++
			}
		}
	}
	for _, k := range []string{"podReady", "rollingUpdate", "create Pod", "delete Pod", "delete Service", "create Service"} {
		if len(kinds[k]) < 2 { // seed 3 acts in all 3; another seed may leave one out
			t.Errorf("%s steps in namespaces %v, want several of the 3", k, kinds[k])
		}
	}
	if all := len(kinds["podReady"]); all != 3 {
		t.Errorf("podReady steps in %d namespaces, want all 3", all)
	}
	if bare == 0 {
		t.Error("no step acted on a Deployment without a Service")
	}
}

// Bad Deployments input is refused at the field.
func TestGeneratedDeploymentsRefuseBadInput(t *testing.T) {
	for _, c := range []struct{ from, to, want string }{
		{"withService: 50%", "withService: 150%", "deps.yaml:13:18: cluster.generate.withService: want at most 100%, got 150%"},
		{"    withService: 50%\n", "", "deps.yaml:12:18: cluster.generate.deployments: deployments need withService"},
		{"{5: 20, 30: 3, 100: 1}", "{5: 10, x: 3}", "deps.yaml:12:26: cluster.generate.deployments.x: want replicas as a whole number, not negative, got \"x\""},
		{"{5: 20, 30: 3, 100: 1}", "{5: 10, 30: many}", "deps.yaml:12:30: cluster.generate.deployments.30: want how many Deployments of 30 replicas"},
		{"{5: 20, 30: 3, 100: 1}", "{5: 10, 05: 3}", "deps.yaml:12:26: cluster.generate.deployments.05: \"05\" given twice"},
		{"{5: 20, 30: 3, 100: 1}", "{}", "deps.yaml:12:18: cluster.generate.deployments: no Deployments"},
		{"{5: 20, 30: 3, 100: 1}", "{5: 0}", "deps.yaml:12:18: cluster.generate.deployments: no Deployments"},
		{"{5: 20, 30: 3, 100: 1}", "{5: 10, 3000000: 1}", "deps.yaml:12:26: cluster.generate.deployments.3000000: want 0 to 2000000 replicas"},
		{"namespaces: 3", "namespaces: 0", "deps.yaml:11:17: cluster.generate.namespaces: want at least 1, got 0"},
		{"namespaces: 3", "namespaces: 3\n    services: 4", "deps.yaml:12:15: cluster.generate.services: give services (each with its own endpoints) or deployments, not both"},
		{"namespaces: 3", "namespaces: 3\n    endpointsPerService: 4", "deps.yaml:12:26: cluster.generate.endpointsPerService: a Deployment's Service has its replicas as endpoints"},
		{"    deployments: {5: 20, 30: 3, 100: 1}\n", "    services: 3\n", "deps.yaml:11:17: cluster.generate.namespaces: namespaces goes with deployments"},
		{"withService: 50%", "withService: 0%", "deps.yaml:17:5: cluster.churn.processes: the services process deletes and creates Services, and withService: 0% generates none"},
		{"controllers:\n  endpointSlice: {batchPeriod: 1s}\n", "", "deps.yaml:10:18: cluster.generate.deployments: generated Deployments' Pods need controllers: {endpointSlice: {}}"},
	} {
		src := strings.Replace(deploymentsScenario, c.from, c.to, 1)
		if src == deploymentsScenario {
			t.Fatalf("%q not in the scenario", c.from)
		}
		_, err := Parse("deps.yaml", []byte(src), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got\n%v\nwant %q", c.to, err, c.want)
		}
	}
}
