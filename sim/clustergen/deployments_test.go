package clustergen

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// loadTest is ClusterLoader2's load-test shape in small: per namespace 10
// small, 3 medium and 1 big Deployment, half of each size (rounded up)
// with a Service.
func loadTest(seed uint64) Spec {
	return Spec{
		Seed: seed, Namespaces: 4, Deployments: map[int]int{5: 10, 30: 3, 250: 1}, WithService: 50_00,
		Types:                 Mix[v1.ServiceType]{v1.ServiceTypeClusterIP: 70, v1.ServiceTypeNodePort: 20, v1.ServiceTypeLoadBalancer: 10},
		ExternalTrafficPolicy: Mix[v1.ServiceExternalTrafficPolicy]{v1.ServiceExternalTrafficPolicyCluster: 1, v1.ServiceExternalTrafficPolicyLocal: 1},
		Conditions:            Mix[Condition]{Ready: 9, NotReady: 1},
		Nodes:                 20,
	}
}

// Every namespace has the Deployments of each size it asks for, their pods,
// and a Service for the chosen share of each size, named as documented.
func TestDeploymentsPerNamespace(t *testing.T) {
	c := mustGenerate(t, loadTest(1))
	type tally struct{ deps, pods, services int }
	perNS := map[string]*tally{}
	bySize := map[string]map[int]int{} // namespace: replicas: Deployments with a Service
	deps := map[string]Deployment{}
	for _, d := range c.Deployments {
		if perNS[d.Namespace] == nil {
			perNS[d.Namespace] = &tally{}
			bySize[d.Namespace] = map[int]int{}
		}
		perNS[d.Namespace].deps++
		deps[d.Namespace+"/"+d.Name] = d
		if d.Service >= 0 {
			bySize[d.Namespace][d.Replicas]++
			svc := c.Services[d.Service]
			if svc.Name != d.Name || svc.Namespace != d.Namespace || svc.Spec.Selector["app"] != d.Name {
				t.Errorf("%s/%s: Service %s/%s selects %v", d.Namespace, d.Name, svc.Namespace, svc.Name, svc.Spec.Selector)
			}
		}
	}
	if len(perNS) != 4 {
		t.Fatalf("%d namespaces, want 4: %v", len(perNS), perNS)
	}
	replicas := map[string]int{}
	for _, p := range c.Pods {
		d, ok := deps[p.Namespace+"/"+p.Labels["app"]]
		if !ok || !strings.HasPrefix(p.Name, d.Name+"-") {
			t.Fatalf("pod %s/%s (app %s) of no Deployment", p.Namespace, p.Name, p.Labels["app"])
		}
		perNS[p.Namespace].pods++
		replicas[p.Namespace+"/"+d.Name]++
	}
	for _, s := range c.Services {
		perNS[s.Namespace].services++
	}
	for i := range 4 {
		ns := fmt.Sprintf("gen-%03d", i)
		got := perNS[ns]
		if got == nil || got.deps != 14 || got.pods != 10*5+3*30+250 || got.services != 5+2+1 {
			t.Errorf("%s: %+v, want 14 Deployments, 390 pods, 8 Services", ns, got)
		}
		if want := map[int]int{5: 5, 30: 2, 250: 1}; fmt.Sprint(bySize[ns]) != fmt.Sprint(want) {
			t.Errorf("%s: Services by Deployment size %v, want %v", ns, bySize[ns], want)
		}
	}
	for key, d := range deps {
		if replicas[key] != d.Replicas {
			t.Errorf("%s: %d pods, want %d replicas", key, replicas[key], d.Replicas)
		}
	}
	if d := c.Deployments[13]; d.Namespace != "gen-000" || d.Name != "dep-00013" || d.Replicas != 250 {
		t.Errorf("the 14th Deployment is %+v, want gen-000/dep-00013 of 250", d)
	}
}

// Pods run on the generated nodes, each Deployment's spread over them, and
// a Deployment without a Service still declares a port.
func TestDeploymentPodsOnNodes(t *testing.T) {
	c := mustGenerate(t, loadTest(1))
	nodes := map[string]bool{}
	for _, n := range c.Nodes {
		nodes[n.Name] = true
	}
	onNodes := map[string]map[string]bool{}
	for _, p := range c.Pods {
		if !nodes[p.Spec.NodeName] {
			t.Fatalf("pod %s/%s on %q, not a generated node", p.Namespace, p.Name, p.Spec.NodeName)
		}
		if len(p.Spec.Containers[0].Ports) == 0 || p.Status.PodIP == "" {
			t.Fatalf("pod %s/%s: ports %v, IP %q", p.Namespace, p.Name, p.Spec.Containers[0].Ports, p.Status.PodIP)
		}
		key := p.Namespace + "/" + p.Labels["app"]
		if onNodes[key] == nil {
			onNodes[key] = map[string]bool{}
		}
		onNodes[key][p.Spec.NodeName] = true
	}
	for _, d := range c.Deployments {
		if want := min(d.Replicas, 20); len(onNodes[d.Namespace+"/"+d.Name]) != want {
			t.Errorf("%s/%s: %d replicas on %d nodes, want %d", d.Namespace, d.Name, d.Replicas, len(onNodes[d.Namespace+"/"+d.Name]), want)
		}
	}
}

// The same seed makes the same bytes; another moves where pods run and
// which Services get which type, not the shape.
func TestDeploymentsAreSeeded(t *testing.T) {
	a, b := mustGenerate(t, loadTest(3)), mustGenerate(t, loadTest(3))
	if digest(t, a) != digest(t, b) {
		t.Fatal("two runs of one spec differ")
	}
	o := mustGenerate(t, loadTest(4))
	if digest(t, o) == digest(t, a) {
		t.Fatal("seeds 3 and 4 give the same cluster")
	}
	if len(o.Pods) != len(a.Pods) || len(o.Services) != len(a.Services) || fmt.Sprint(o.Deployments) != fmt.Sprint(a.Deployments) {
		t.Error("another seed changed the Deployments")
	}
	moved, retyped := false, false
	for i := range a.Pods {
		moved = moved || a.Pods[i].Spec.NodeName != o.Pods[i].Spec.NodeName
	}
	for i := range a.Services {
		retyped = retyped || a.Services[i].Spec.Type != o.Services[i].Spec.Type
	}
	if !moved || !retyped {
		t.Errorf("another seed: pods moved %v, Services retyped %v", moved, retyped)
	}
}

// WithService's share, rounded up per size: none, every one, a third.
func TestWithServiceShare(t *testing.T) {
	for _, c := range []struct{ share, want int }{{0, 0}, {100_00, 14}, {33_33, 4 + 1 + 1}} {
		s := loadTest(1)
		s.Namespaces, s.WithService = 1, c.share
		if got := len(mustGenerate(t, s).Services); got != c.want {
			t.Errorf("withService %d: %d Services, want %d", c.share, got, c.want)
		}
	}
}

func TestBadDeploymentSpecs(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Services: 3, Deployments: map[int]int{5: 1}}, "services: give services (each with its own endpoints) or deployments, not both"},
		{Spec{Deployments: map[int]int{5: 1}, EndpointsPerService: Mix[int]{3: 1}}, "endpointsPerService: a Deployment's Service has its replicas"},
		{Spec{Deployments: map[int]int{5: 1}, Namespaces: -1}, "namespaces: want 1 to 10000 namespaces, got -1"},
		{Spec{Deployments: map[int]int{5: 1}, WithService: 100_01}, "withService: want a share from 0 to 10000"},
		{Spec{Deployments: map[int]int{-5: 1}}, "deployments.-5: want 0 to 2000000 replicas, got -5"},
		{Spec{Deployments: map[int]int{5: -1}}, "deployments.5: want 0 to 1000000 Deployments of 5 replicas, got -1"},
		{Spec{Deployments: map[int]int{5: 0}}, "deployments: no Deployments"},
		{Spec{Deployments: map[int]int{1000: 2100}}, "deployments: 2100000 pods in all: at most 2000000"},
		{Spec{Deployments: map[int]int{5: 1}, Namespace: strings.Repeat("n", 60)}, "namespace: the namespaces would be named"},
		{Spec{Deployments: map[int]int{5: 1}, Conditions: Mix[Condition]{Terminating: 1}}, "conditions.terminating: a generated Pod cannot be terminating"},
	} {
		_, err := Generate(c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.spec, err, c.want)
		}
	}
}
