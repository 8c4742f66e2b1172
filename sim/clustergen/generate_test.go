package clustergen

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// mixed is a spec that uses every mix.
func mixed(seed uint64) Spec {
	return Spec{
		Seed:                  seed,
		Services:              1000,
		EndpointsPerService:   Mix[int]{0: 5, 1: 45, 2: 30, 10: 15, 250: 5},
		Ports:                 Mix[int]{1: 70, 2: 20, 3: 10},
		Protocols:             Mix[v1.Protocol]{v1.ProtocolTCP: 80, v1.ProtocolUDP: 15, v1.ProtocolSCTP: 5},
		Types:                 Mix[v1.ServiceType]{v1.ServiceTypeClusterIP: 70, v1.ServiceTypeNodePort: 20, v1.ServiceTypeLoadBalancer: 10},
		ExternalTrafficPolicy: Mix[v1.ServiceExternalTrafficPolicy]{v1.ServiceExternalTrafficPolicyCluster: 50, v1.ServiceExternalTrafficPolicyLocal: 50},
		InternalTrafficPolicy: Mix[v1.ServiceInternalTrafficPolicy]{v1.ServiceInternalTrafficPolicyCluster: 90, v1.ServiceInternalTrafficPolicyLocal: 10},
		SessionAffinity:       Mix[v1.ServiceAffinity]{v1.ServiceAffinityNone: 75, v1.ServiceAffinityClientIP: 25},
		Conditions:            Mix[Condition]{Ready: 85, NotReady: 5, ServingTerminating: 5, Terminating: 5},
		Nodes:                 50,
		Zones:                 3,
	}
}

func mustGenerate(t testing.TB, s Spec) *Cluster {
	t.Helper()
	c, err := Generate(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// digest is a hash of every object's JSON, in order.
func digest(t testing.TB, c *Cluster) [32]byte {
	t.Helper()
	var b bytes.Buffer
	for _, o := range c.Objects() {
		if err := json.NewEncoder(&b).Encode(o); err != nil {
			t.Fatal(err)
		}
	}
	return sha256.Sum256(b.Bytes())
}

func TestSameSeedSameBytes(t *testing.T) {
	for _, pods := range []bool{false, true} {
		s := mixed(7)
		s.Pods = pods
		if pods {
			s.Conditions = Mix[Condition]{Ready: 9, NotReady: 1}
		}
		a, b := digest(t, mustGenerate(t, s)), digest(t, mustGenerate(t, s))
		if a != b {
			t.Errorf("pods=%v: two runs of one spec differ", pods)
		}
		s.Seed = 8
		if digest(t, mustGenerate(t, s)) == a {
			t.Errorf("pods=%v: seeds 7 and 8 give the same cluster", pods)
		}
	}
}

// TestSeedMovesEveryChoice: another seed changes each random choice, not
// only one of them.
func TestSeedMovesEveryChoice(t *testing.T) {
	a, b := mustGenerate(t, mixed(1)), mustGenerate(t, mixed(2))
	same := map[string]bool{"type": true, "ports": true, "affinity": true, "internal": true, "endpoints": true, "node": true}
	for i := range a.Services {
		x, y := a.Services[i], b.Services[i]
		same["type"] = same["type"] && x.Spec.Type == y.Spec.Type
		same["ports"] = same["ports"] && len(x.Spec.Ports) == len(y.Spec.Ports)
		same["affinity"] = same["affinity"] && x.Spec.SessionAffinity == y.Spec.SessionAffinity
		same["internal"] = same["internal"] && *x.Spec.InternalTrafficPolicy == *y.Spec.InternalTrafficPolicy
	}
	ea, eb := endpointsByService(a), endpointsByService(b)
	for i := range ea {
		same["endpoints"] = same["endpoints"] && len(ea[i]) == len(eb[i])
		if len(ea[i]) > 0 && len(eb[i]) > 0 {
			same["node"] = same["node"] && *ea[i][0].NodeName == *eb[i][0].NodeName
		}
	}
	for k, v := range same {
		if v {
			t.Errorf("seed 1 and 2 make the same %s choices", k)
		}
	}
}

func endpointsByService(c *Cluster) [][]discovery.Endpoint {
	out := make([][]discovery.Endpoint, len(c.Services))
	idx := map[string]int{}
	for i, s := range c.Services {
		idx[s.Name] = i
	}
	for _, sl := range c.Slices {
		i := idx[sl.Labels[discovery.LabelServiceName]]
		out[i] = append(out[i], sl.Endpoints...)
	}
	return out
}

func TestProportionsAreExact(t *testing.T) {
	c := mustGenerate(t, mixed(3))
	tally := map[string]int{}
	for _, s := range c.Services {
		tally["type/"+string(s.Spec.Type)]++
		tally["affinity/"+string(s.Spec.SessionAffinity)]++
		tally["internal/"+string(*s.Spec.InternalTrafficPolicy)]++
		tally[fmt.Sprintf("ports/%d", len(s.Spec.Ports))]++
		if s.Spec.Type != v1.ServiceTypeClusterIP {
			tally["external/"+string(s.Spec.ExternalTrafficPolicy)]++
		} else if s.Spec.ExternalTrafficPolicy != "" {
			t.Errorf("%s: ClusterIP with externalTrafficPolicy", s.Name)
		}
		for _, p := range s.Spec.Ports {
			tally["protocol/"+string(p.Protocol)]++
		}
	}
	for _, eps := range endpointsByService(c) {
		tally[fmt.Sprintf("endpoints/%d", len(eps))]++
		for _, e := range eps {
			r, s, x := *e.Conditions.Ready, *e.Conditions.Serving, *e.Conditions.Terminating
			tally[fmt.Sprintf("cond/%v,%v,%v", r, s, x)]++
		}
	}
	// 1000 Services; 1,400 ports (700+400+300); 15,050 endpoints
	// (0×50 + 1×450 + 2×300 + 10×150 + 250×50). A half left by rounding
	// goes to the smaller value first: notReady < ready < servingTerminating.
	want := map[string]int{
		"type/ClusterIP": 700, "type/NodePort": 200, "type/LoadBalancer": 100,
		"affinity/None": 750, "affinity/ClientIP": 250,
		"internal/Cluster": 900, "internal/Local": 100,
		"external/Cluster": 150, "external/Local": 150,
		"ports/1": 700, "ports/2": 200, "ports/3": 100,
		"protocol/TCP": 1120, "protocol/UDP": 210, "protocol/SCTP": 70,
		"endpoints/0": 50, "endpoints/1": 450, "endpoints/2": 300, "endpoints/10": 150, "endpoints/250": 50,
		"cond/true,true,false": 12793, "cond/false,false,false": 753, "cond/false,true,true": 752, "cond/false,false,true": 752,
	}
	for k, v := range want {
		if tally[k] != v {
			t.Errorf("%s: %d, want %d", k, tally[k], v)
		}
	}
	for k, v := range tally {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected %s: %d", k, v)
		}
	}
}

func TestCountsLargestRemainder(t *testing.T) {
	for _, c := range []struct {
		mix  Mix[string]
		n    int
		want []int
	}{
		{Mix[string]{"a": 1, "b": 1, "c": 1}, 10, []int{4, 3, 3}},
		{Mix[string]{"a": 1, "b": 1, "c": 1}, 2, []int{1, 1, 0}},
		{Mix[string]{"a": 50, "b": 30, "c": 20}, 7, []int{4, 2, 1}}, // 3.5 2.1 1.4
		{Mix[string]{"a": 0, "b": 5}, 3, []int{0, 3}},
		{Mix[string]{"a": 1}, 0, []int{0}},
	} {
		_, got := counts(c.mix, c.n)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("counts(%v, %d) = %v, want %v", c.mix, c.n, got, c.want)
		}
	}
}

func TestNoAddressOrPortCollides(t *testing.T) {
	s := mixed(5)
	// 1,000 NodePort and 1,000 LoadBalancer ports, and a health check
	// port for each Local LoadBalancer (about 500): within the range's
	// 2,768 node ports.
	s.Services = 2000
	s.Ports = nil
	s.Types = Mix[v1.ServiceType]{v1.ServiceTypeNodePort: 1, v1.ServiceTypeLoadBalancer: 1}
	s.EndpointsPerService = Mix[int]{3: 1}
	c := mustGenerate(t, s)
	ips := map[string]string{}
	claim := func(ip, who string) {
		if prev, ok := ips[ip]; ok {
			t.Fatalf("%s: %s is %s's too", who, ip, prev)
		}
		ips[ip] = who
	}
	nodePorts := map[int32]string{}
	healthChecks := 0
	for _, n := range c.Nodes {
		claim(n.Status.Addresses[0].Address, n.Name)
	}
	for _, svc := range c.Services {
		claim(svc.Spec.ClusterIP, svc.Name)
		for _, in := range svc.Status.LoadBalancer.Ingress {
			claim(in.IP, svc.Name+" ingress")
		}
		local := svc.Spec.Type == v1.ServiceTypeLoadBalancer && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
		if local != (svc.Spec.HealthCheckNodePort != 0) {
			t.Errorf("%s (%s, %s): healthCheckNodePort %d", svc.Name, svc.Spec.Type, svc.Spec.ExternalTrafficPolicy, svc.Spec.HealthCheckNodePort)
		}
		if local {
			healthChecks++
		}
		ports := []int32{svc.Spec.HealthCheckNodePort}
		for _, p := range svc.Spec.Ports {
			ports = append(ports, p.NodePort)
		}
		for _, p := range ports {
			if p == 0 {
				continue
			}
			if p < 30000 || p > 32767 {
				t.Errorf("%s: node port %d outside 30000-32767", svc.Name, p)
			}
			if prev, ok := nodePorts[p]; ok {
				t.Fatalf("%s: node port %d is %s's too", svc.Name, p, prev)
			}
			nodePorts[p] = svc.Name
		}
	}
	for _, sl := range c.Slices {
		for _, e := range sl.Endpoints {
			claim(e.Addresses[0], sl.Name)
		}
	}
	if len(nodePorts) != 2000+healthChecks || healthChecks < 400 {
		t.Errorf("%d node ports", len(nodePorts))
	}
	if len(ips) != 50+2000+1000+6000 {
		t.Errorf("%d addresses", len(ips))
	}
}

func TestSlicesPackedAsTheController(t *testing.T) {
	s := Spec{Services: 4, EndpointsPerService: Mix[int]{0: 1, 1: 1, 100: 1, 250: 1}, Nodes: 7}
	c := mustGenerate(t, s)
	sizes := map[string][]int{}
	for _, sl := range c.Slices {
		svc := sl.Labels[discovery.LabelServiceName]
		if !strings.HasPrefix(sl.Name, svc+"-") {
			t.Errorf("slice %s of %s", sl.Name, svc)
		}
		if sl.Annotations[v1.EndpointsLastChangeTriggerTime] != "2026-01-01T00:00:00Z" {
			t.Errorf("%s: trigger time %q", sl.Name, sl.Annotations[v1.EndpointsLastChangeTriggerTime])
		}
		if sl.Labels[discovery.LabelManagedBy] != "endpointslice-controller.k8s.io" || sl.OwnerReferences[0].Name != svc {
			t.Errorf("%s: not the controller's: %v %v", sl.Name, sl.Labels, sl.OwnerReferences)
		}
		if len(sl.Endpoints) > 100 {
			t.Errorf("%s: %d endpoints", sl.Name, len(sl.Endpoints))
		}
		sizes[svc] = append(sizes[svc], len(sl.Endpoints))
	}
	// Which Service gets which count is the seed's.
	var got []string
	for _, svc := range c.Services {
		got = append(got, fmt.Sprint(sizes[svc.Name]))
	}
	slices.Sort(got)
	if want := "[[0] [100 100 50] [100] [1]]"; fmt.Sprint(got) != want {
		t.Errorf("slice sizes %v, want %s", got, want)
	}
	// An empty Service has the controller's placeholder: no ports.
	for _, sl := range c.Slices {
		if len(sl.Endpoints) == 0 && len(sl.Ports) != 0 {
			t.Errorf("placeholder %s has ports %v", sl.Name, sl.Ports)
		}
	}
	// Endpoints of one Service go round the nodes from a seeded start.
	for _, sl := range c.Slices {
		if len(sl.Endpoints) == 100 && sl.Name[len(sl.Name)-1] == '0' {
			first := *sl.Endpoints[0].NodeName
			var n int
			fmt.Sscanf(first, "node-%d", &n)
			for j, e := range sl.Endpoints {
				if want := fmt.Sprintf("node-%03d", (n+j)%7); *e.NodeName != want {
					t.Fatalf("%s endpoint %d on %s, want %s", sl.Name, j, *e.NodeName, want)
				}
			}
		}
	}
}

func TestMaxEndpointsPerSlice(t *testing.T) {
	c := mustGenerate(t, Spec{Services: 1, EndpointsPerService: Mix[int]{7: 1}, MaxEndpointsPerSlice: 3})
	var sizes []int
	for _, sl := range c.Slices {
		sizes = append(sizes, len(sl.Endpoints))
	}
	if fmt.Sprint(sizes) != "[3 3 1]" {
		t.Errorf("sizes %v", sizes)
	}
}

func TestPods(t *testing.T) {
	c := mustGenerate(t, Spec{Services: 2, EndpointsPerService: Mix[int]{3: 1}, Pods: true, Nodes: 2,
		Conditions: Mix[Condition]{Ready: 2, NotReady: 1}, Zones: 2})
	if len(c.Slices) != 0 || len(c.Pods) != 6 {
		t.Fatalf("%d slices, %d pods", len(c.Slices), len(c.Pods))
	}
	ready := 0
	for _, p := range c.Pods {
		svc := c.Services[0]
		if !strings.HasPrefix(p.Name, svc.Name) {
			svc = c.Services[1]
		}
		if p.Labels["app"] != svc.Spec.Selector["app"] {
			t.Errorf("%s: labels %v, selector %v", p.Name, p.Labels, svc.Spec.Selector)
		}
		if p.Spec.Containers[0].Ports[0].ContainerPort != svc.Spec.Ports[0].TargetPort.IntVal {
			t.Errorf("%s: container port %d", p.Name, p.Spec.Containers[0].Ports[0].ContainerPort)
		}
		if p.Status.Conditions[0].Status == v1.ConditionTrue {
			ready++
		}
	}
	if ready != 4 {
		t.Errorf("%d ready pods, want 4", ready)
	}
	if c.Nodes[1].Labels[v1.LabelTopologyZone] != "zone-b" {
		t.Errorf("node-001 labels %v", c.Nodes[1].Labels)
	}
}

func TestBadSpecs(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Services: -1}, "services: want 0 to 1000000 Services, got -1"},
		{Spec{Services: 1, Nodes: -2}, "nodes: want 1 to 100000 Nodes, got -2"},
		{Spec{Services: 1, Types: Mix[v1.ServiceType]{"ExternalName": 1}}, "types.ExternalName: want ClusterIP, NodePort or LoadBalancer, got ExternalName"},
		{Spec{Services: 1, Types: Mix[v1.ServiceType]{"ClusterIP": 0}}, "types: every share is 0"},
		{Spec{Services: 1, Ports: Mix[int]{-1: 1}}, "ports.-1: want 1 to 100 ports"},
		{Spec{Services: 1, Conditions: Mix[Condition]{Ready: -1, NotReady: 2}}, "conditions.ready: want a share from 0"},
		{Spec{Services: 1, Pods: true, Conditions: Mix[Condition]{Terminating: 1}}, "conditions.terminating: a generated Pod cannot be terminating"},
		{Spec{Services: 1, PodCIDR: "10.96.0.0/16"}, "podCIDR: 10.96.0.0/16 overlaps serviceCIDR 10.96.0.0/12"},
		{Spec{Services: 1, ServiceCIDR: "fd00::/108"}, "serviceCIDR: want an IPv4 CIDR"},
		{Spec{Services: 1, ServiceCIDR: "10.96.0.1/12"}, "did you mean 10.96.0.0/12?"},
		{Spec{Services: 300, ServiceCIDR: "10.96.0.0/24"}, "serviceCIDR: 10.96.0.0/24 holds 254 addresses; the cluster needs 300 cluster IPs"},
		{Spec{Services: 10, EndpointsPerService: Mix[int]{30: 1}, PodCIDR: "10.128.0.0/24"}, "podCIDR: 10.128.0.0/24 holds 254 addresses; the cluster needs 300"},
		{Spec{Services: 3000, Types: Mix[v1.ServiceType]{"NodePort": 1}}, "nodePortRange: 30000-32767 holds 2768 ports; the NodePort and LoadBalancer Services need 3000"},
		{Spec{Services: 1, NodePortRange: "32767-30000"}, "nodePortRange: want FIRST-LAST"},
		{Spec{Services: 1, Namespace: "Gen"}, "namespace: a lowercase RFC 1123 label"},
		{Spec{Services: 1, MaxEndpointsPerSlice: 1001}, "maxEndpointsPerSlice: want 1 to 1000"},
		{Spec{Services: 1000, EndpointsPerService: Mix[int]{2001: 1}}, "endpointsPerService: 2001000 endpoints in all: at most 2000000"},
	} {
		_, err := Generate(c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.spec, err, c.want)
		}
		if _, ok := err.(Errors); err != nil && !ok {
			t.Errorf("%+v: error %T, want Errors", c.spec, err)
		}
	}
}

// BenchmarkGenerate makes 20,000 Services × 10 endpoints (200,000
// endpoints in 20,000 slices) over 100 nodes.
func BenchmarkGenerate(b *testing.B) {
	s := Spec{Seed: 1, Services: 20000, EndpointsPerService: Mix[int]{10: 1}, Nodes: 100,
		Types: Mix[v1.ServiceType]{v1.ServiceTypeClusterIP: 90, v1.ServiceTypeNodePort: 5, v1.ServiceTypeLoadBalancer: 5}}
	b.ReportAllocs()
	for range b.N {
		c, err := Generate(s)
		if err != nil {
			b.Fatal(err)
		}
		if len(c.Slices) != 20000 {
			b.Fatal(len(c.Slices))
		}
	}
}

// The names and addresses docs/scenario-format.md ("cluster") promises.
func TestDocumentedNamesAndAddresses(t *testing.T) {
	c := mustGenerate(t, Spec{Services: 100, EndpointsPerService: Mix[int]{10: 1}, Nodes: 4,
		Types: Mix[v1.ServiceType]{v1.ServiceTypeClusterIP: 1, v1.ServiceTypeLoadBalancer: 1}})
	svc := c.Services[42]
	if svc.Name != "svc-00042" || svc.Namespace != "gen" || svc.Spec.ClusterIP != "10.96.0.43" {
		t.Errorf("Service 42: %s/%s %s", svc.Namespace, svc.Name, svc.Spec.ClusterIP)
	}
	sl := c.Slices[42]
	if sl.Name != "svc-00042-0" || sl.Endpoints[0].Addresses[0] != "10.128.1.165" || sl.Endpoints[9].Addresses[0] != "10.128.1.174" {
		t.Errorf("slice 42: %s %v..%v", sl.Name, sl.Endpoints[0].Addresses, sl.Endpoints[9].Addresses)
	}
	if n := c.Nodes[0]; n.Name != "node-000" || n.Status.Addresses[0].Address != "192.168.0.1" {
		t.Errorf("node 0: %s %v", n.Name, n.Status.Addresses)
	}
	lbs := 0
	for _, s := range c.Services {
		if s.Spec.Type == v1.ServiceTypeLoadBalancer {
			lbs++
			if want := fmt.Sprintf("172.16.0.%d", lbs); s.Status.LoadBalancer.Ingress[0].IP != want {
				t.Fatalf("LoadBalancer %d (%s): %s, want %s", lbs, s.Name, s.Status.LoadBalancer.Ingress[0].IP, want)
			}
			if s.Spec.Ports[0].Name != "port-0" || s.Spec.Ports[0].Port != 80 || s.Spec.Ports[0].TargetPort.IntVal != 8080 {
				t.Errorf("%s ports %v", s.Name, s.Spec.Ports)
			}
		}
	}
	if lbs != 50 {
		t.Errorf("%d LoadBalancers", lbs)
	}
}
