package clustergen

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/proxysim/proxysim/sim/vclock"
)

// Cluster is what Generate made. Services[i] is svc-i; its slices (or
// pods) come in Slices (or Pods) in Service order, then in endpoint order.
// Of a Deployments spec, Services[i] is the Service of the Deployment
// whose Service field is i, and the Pods come in Deployment order.
type Cluster struct {
	Nodes    []*v1.Node
	Services []*v1.Service
	Slices   []*discovery.EndpointSlice
	Pods     []*v1.Pod
	// Deployments are a Deployments spec's, in the order of their pods
	// (they make no objects of their own: their pods are the Pods).
	Deployments []Deployment
}

// Objects lists every object in the order to create them: the Nodes, the
// Services, then the slices or Pods.
func (c *Cluster) Objects() []runtime.Object {
	out := make([]runtime.Object, 0, len(c.Nodes)+len(c.Services)+len(c.Slices)+len(c.Pods))
	for _, n := range c.Nodes {
		out = append(out, n)
	}
	for _, s := range c.Services {
		out = append(out, s)
	}
	for _, s := range c.Slices {
		out = append(out, s)
	}
	for _, p := range c.Pods {
		out = append(out, p)
	}
	return out
}

// The random streams, one per choice, so that changing one mix does not
// move what another decided.
const (
	streamEndpoints = iota + 1
	streamPorts
	streamProtocols
	streamTypes
	streamExternalPolicy
	streamInternalPolicy
	streamAffinity
	streamConditions
	streamPlacement
)

// clientIPTimeout is the API server's default ClientIP affinity timeout
// (v1.DefaultClientIPServiceAffinitySeconds).
const clientIPTimeout = int32(v1.DefaultClientIPServiceAffinitySeconds)

// pauseImage is what every generated Pod runs: it only needs to exist.
const pauseImage = "registry.k8s.io/pause:3.10"

// Generate makes the cluster the spec describes. A spec with problems makes
// nothing: the error is an Errors naming every bad field.
func Generate(spec Spec) (*Cluster, error) {
	p, err := plan(spec)
	if err != nil {
		return nil, err
	}
	return p.build(), nil
}

// planned is a checked spec with every random choice made.
type planned struct {
	Spec
	endpoints  []int // per Service
	ports      []int // per Service
	types      []v1.ServiceType
	external   []v1.ServiceExternalTrafficPolicy // per Service; "" for ClusterIP
	internal   []v1.ServiceInternalTrafficPolicy
	affinity   []v1.ServiceAffinity
	protocols  []v1.Protocol // per port, in Service then port order
	conditions []Condition   // per endpoint, in Service then endpoint order
	firstNode  []int         // per Service (per Deployment): the node of its endpoint 0
	// A Deployments spec's Deployments, and each Service's Deployment.
	deployments []Deployment
	serviceDeps []int
	pools       pools
	nodePort    int // the next free node port
}

type pools struct{ service, pod, node, lb ipPool }

// cidrField is a CIDR of the spec, its default, and the pool it fills.
type cidrField struct {
	field string
	cidr  *string
	def   string
	pool  *ipPool
}

func plan(spec Spec) (*planned, error) {
	var errs Errors
	s := &spec
	if s.Namespace == "" {
		s.Namespace = DefaultNamespace
	}
	for _, m := range validateName(s.Namespace) {
		errs.add("namespace", "%s", m)
	}
	if len(s.Deployments) > 0 {
		checkDeployments(&errs, s)
	}
	if s.Services < 0 || s.Services > MaxServices {
		errs.add("services", "want 0 to %d Services, got %d", MaxServices, s.Services)
	}
	if s.Nodes == 0 {
		s.Nodes = 1
	}
	if s.Nodes < 0 || s.Nodes > MaxNodes {
		errs.add("nodes", "want 1 to %d Nodes, got %d", MaxNodes, s.Nodes)
	}
	if s.Zones < 0 || s.Zones > 26 {
		errs.add("zones", "want 0 to 26 zones, got %d", s.Zones)
	}
	if len(s.NodeZones) > 0 && len(s.NodeZones) != s.Nodes {
		errs.add("nodeZones", "want one zone per node (%d), got %d", s.Nodes, len(s.NodeZones))
	}
	if len(s.NodeLabels) > 0 && len(s.NodeLabels) != s.Nodes {
		errs.add("nodeLabels", "want one set of labels per node (%d), got %d", s.Nodes, len(s.NodeLabels))
	}
	if s.MaxEndpointsPerSlice == 0 {
		s.MaxEndpointsPerSlice = 100
	}
	if s.MaxEndpointsPerSlice < 1 || s.MaxEndpointsPerSlice > 1000 {
		errs.add("maxEndpointsPerSlice", "want 1 to 1000 (the controller's --max-endpoints-per-slice), got %d", s.MaxEndpointsPerSlice)
	}
	if s.Created.IsZero() {
		s.Created = vclock.Epoch
	}
	s.EndpointsPerService = orDefault(s.EndpointsPerService, 1)
	s.Ports = orDefault(s.Ports, 1)
	s.Protocols = orDefault(s.Protocols, v1.ProtocolTCP)
	s.Types = orDefault(s.Types, v1.ServiceTypeClusterIP)
	s.ExternalTrafficPolicy = orDefault(s.ExternalTrafficPolicy, v1.ServiceExternalTrafficPolicyCluster)
	s.InternalTrafficPolicy = orDefault(s.InternalTrafficPolicy, v1.ServiceInternalTrafficPolicyCluster)
	s.SessionAffinity = orDefault(s.SessionAffinity, v1.ServiceAffinityNone)
	s.Conditions = orDefault(s.Conditions, Ready)
	checkMix(&errs, "endpointsPerService", s.EndpointsPerService, func(n int) string {
		if n < 0 || n > MaxEndpoints {
			return fmt.Sprintf("want 0 to %d endpoints", MaxEndpoints)
		}
		return ""
	})
	checkMix(&errs, "ports", s.Ports, func(n int) string {
		if n < 1 || n > MaxPorts {
			return fmt.Sprintf("want 1 to %d ports", MaxPorts)
		}
		return ""
	})
	checkMix(&errs, "protocols", s.Protocols, oneOf(v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP))
	checkMix(&errs, "types", s.Types, oneOf(v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer))
	checkMix(&errs, "externalTrafficPolicy", s.ExternalTrafficPolicy, oneOf(v1.ServiceExternalTrafficPolicyCluster, v1.ServiceExternalTrafficPolicyLocal))
	checkMix(&errs, "internalTrafficPolicy", s.InternalTrafficPolicy, oneOf(v1.ServiceInternalTrafficPolicyCluster, v1.ServiceInternalTrafficPolicyLocal))
	checkMix(&errs, "sessionAffinity", s.SessionAffinity, oneOf(v1.ServiceAffinityNone, v1.ServiceAffinityClientIP))
	conds := oneOf(Ready, NotReady, ServingTerminating, Terminating)
	if s.Pods {
		// A Pod is created before it is deleted: a terminating one comes
		// from a delete step with a grace period.
		conds = func(c Condition) string {
			if c == ServingTerminating || c == Terminating {
				return "a generated Pod cannot be terminating: want ready or notReady (delete pods with a gracePeriod to make them terminate)"
			}
			return oneOf(Ready, NotReady)(c)
		}
	}
	checkMix(&errs, "conditions", s.Conditions, conds)

	p := &planned{Spec: *s}
	fields := []cidrField{
		{"serviceCIDR", &p.ServiceCIDR, "10.96.0.0/12", &p.pools.service},
		{"podCIDR", &p.PodCIDR, "10.128.0.0/9", &p.pools.pod},
		{"nodeCIDR", &p.NodeCIDR, "192.168.0.0/16", &p.pools.node},
		{"loadBalancerCIDR", &p.LoadBalancerCIDR, "172.16.0.0/12", &p.pools.lb},
	}
	var parsed []int // indexes of fields that parsed
	for i, f := range fields {
		if *f.cidr == "" {
			*f.cidr = f.def
		}
		pool, err := newIPPool(*f.cidr)
		if err != nil {
			errs.add(f.field, "%v", err)
			continue
		}
		*f.pool = pool
		for _, j := range parsed {
			if pool.overlaps(*fields[j].pool) {
				errs.add(f.field, "%s overlaps %s %s: addresses would collide", *f.cidr, fields[j].field, *fields[j].cidr)
			}
		}
		parsed = append(parsed, i)
	}
	if p.NodePortRange == "" {
		p.NodePortRange = "30000-32767"
	}
	first, last, err := parsePortRange(p.NodePortRange)
	if err != nil {
		errs.add("nodePortRange", "%v", err)
	}
	if len(errs) > 0 {
		return nil, errs
	}

	n := s.Services
	pods := -1 // the pods of all Deployments, if a Deployments spec
	if len(s.Deployments) > 0 {
		pods = p.planDeployments()
		n = p.Services
	} else {
		p.endpoints = spread(s.EndpointsPerService, n, stream(s.Seed, streamEndpoints))
	}
	p.ports = spread(s.Ports, n, stream(s.Seed, streamPorts))
	p.types = spread(s.Types, n, stream(s.Seed, streamTypes))
	p.internal = spread(s.InternalTrafficPolicy, n, stream(s.Seed, streamInternalPolicy))
	p.affinity = spread(s.SessionAffinity, n, stream(s.Seed, streamAffinity))
	totalPorts, totalEndpoints, external, lbs := 0, 0, 0, 0
	for i := range n {
		totalPorts += p.ports[i]
		totalEndpoints += p.endpoints[i]
		if p.types[i] != v1.ServiceTypeClusterIP {
			external++
		}
		if p.types[i] == v1.ServiceTypeLoadBalancer {
			lbs++
		}
	}
	if pods >= 0 {
		totalEndpoints = pods // every pod, with a Service or not
		if pods > MaxEndpoints {
			errs.add("deployments", "%d pods in all: at most %d", pods, MaxEndpoints)
			return nil, errs
		}
	}
	if totalEndpoints > MaxEndpoints {
		errs.add("endpointsPerService", "%d endpoints in all: at most %d", totalEndpoints, MaxEndpoints)
		return nil, errs
	}
	// The external policy is a mix over the Services reachable from
	// outside: the API server refuses it on a ClusterIP Service.
	ext := spread(s.ExternalTrafficPolicy, external, stream(s.Seed, streamExternalPolicy))
	p.external = make([]v1.ServiceExternalTrafficPolicy, n)
	nodePorts := 0
	for i, k := 0, 0; i < n; i++ {
		if p.types[i] == v1.ServiceTypeClusterIP {
			continue
		}
		p.external[i] = ext[k]
		k++
		nodePorts += p.ports[i]
		if p.types[i] == v1.ServiceTypeLoadBalancer && p.external[i] == v1.ServiceExternalTrafficPolicyLocal {
			nodePorts++ // its healthCheckNodePort
		}
	}
	p.protocols = spread(s.Protocols, totalPorts, stream(s.Seed, streamProtocols))
	p.conditions = spread(s.Conditions, totalEndpoints, stream(s.Seed, streamConditions))
	place := stream(s.Seed, streamPlacement)
	p.firstNode = make([]int, n)
	if pods >= 0 {
		p.firstNode = make([]int, len(p.deployments))
	}
	for i := range p.firstNode {
		p.firstNode[i] = place.IntN(s.Nodes)
	}
	for _, c := range []struct {
		field string
		pool  ipPool
		need  int
		what  string
	}{
		{"serviceCIDR", p.pools.service, n, "cluster IPs"},
		{"podCIDR", p.pools.pod, totalEndpoints, "endpoint addresses"},
		{"nodeCIDR", p.pools.node, s.Nodes, "node addresses"},
		{"loadBalancerCIDR", p.pools.lb, lbs, "load balancer IPs"},
	} {
		if uint64(c.need) > c.pool.size {
			errs.add(c.field, "%s holds %d addresses; the cluster needs %d %s", c.pool.prefix, c.pool.size, c.need, c.what)
		}
	}
	if have := last - first + 1; nodePorts > have {
		errs.add("nodePortRange", "%s holds %d ports; the NodePort and LoadBalancer Services need %d (node ports and health check node ports): widen the range or make fewer external Services", p.NodePortRange, have, nodePorts)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	p.nodePort = first
	return p, nil
}

// nodeCPU is every generated Node's allocatable CPU.
var nodeCPU = resource.MustParse("4")

// build makes the objects of a plan.
func (p *planned) build() *Cluster {
	c := &Cluster{Nodes: make([]*v1.Node, p.Nodes), Services: make([]*v1.Service, p.Services)}
	nodeNames := make([]string, p.Nodes)
	zones := make([]string, p.Nodes)
	for i := range p.Nodes {
		nodeNames[i] = fmt.Sprintf(nodeNameFormat, i)
		labels := map[string]string{v1.LabelHostname: nodeNames[i]}
		if len(p.NodeLabels) > 0 {
			maps.Copy(labels, p.NodeLabels[i])
		}
		switch {
		case len(p.NodeZones) > 0:
			zones[i] = p.NodeZones[i]
		case p.Zones > 0:
			zones[i] = "zone-" + string(rune('a'+i%p.Zones))
		}
		if zones[i] != "" {
			labels[v1.LabelTopologyZone] = zones[i]
		}
		c.Nodes[i] = &v1.Node{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: nodeNames[i], Labels: labels},
			// Ready, with the allocatable CPU of a 4-core node: the
			// EndpointSlice controller shares topology-mode Auto's hints
			// by the Ready nodes' CPU per zone.
			Status: v1.NodeStatus{
				Addresses: []v1.NodeAddress{
					{Type: v1.NodeInternalIP, Address: p.pools.node.take()},
					{Type: v1.NodeHostName, Address: nodeNames[i]},
				},
				Allocatable: v1.ResourceList{v1.ResourceCPU: nodeCPU},
				Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
			},
		}
	}
	if len(p.deployments) > 0 {
		p.buildDeployments(c, nodeNames, zones)
		return c
	}
	trigger := p.Created.UTC().Format(time.RFC3339Nano)
	port, ep := 0, 0 // the next port and endpoint, cluster-wide
	for i := range p.Services {
		svc := p.service(i, p.protocols[port:port+p.ports[i]])
		port += p.ports[i]
		c.Services[i] = svc
		n := p.endpoints[i]
		if p.Pods {
			c.Pods = append(c.Pods, p.pods(svc.Namespace, svc.Name, containerPorts(svc), p.conditions[ep:ep+n], p.firstNode[i], nodeNames, zones)...)
		} else {
			c.Slices = append(c.Slices, p.slices(svc, p.conditions[ep:ep+n], p.firstNode[i], nodeNames, zones, trigger)...)
		}
		ep += n
	}
	return c
}

// service is Service i with its ports' protocols.
func (p *planned) service(i int, protocols []v1.Protocol) *v1.Service {
	name, ns := fmt.Sprintf(serviceNameFormat, i), p.Namespace
	if len(p.deployments) > 0 {
		d := p.deployments[p.serviceDeps[i]]
		name, ns = d.Name, d.Namespace
	}
	ip := p.pools.service.take()
	typ := p.types[i]
	svc := &v1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			// A UID of its own, so that its slices can name their owner;
			// the world's own UIDs have 8000 where this has 9000.
			UID: types.UID(fmt.Sprintf("00000000-0000-4000-9000-%012d", i)),
		},
		Spec: v1.ServiceSpec{
			Type:                  typ,
			ClusterIP:             ip,
			ClusterIPs:            []string{ip},
			IPFamilies:            []v1.IPFamily{v1.IPv4Protocol},
			IPFamilyPolicy:        ptr(v1.IPFamilyPolicySingleStack),
			SessionAffinity:       p.affinity[i],
			InternalTrafficPolicy: ptr(p.internal[i]),
			Ports:                 make([]v1.ServicePort, len(protocols)),
		},
	}
	if p.Pods {
		svc.Spec.Selector = map[string]string{"app": name}
	}
	if p.affinity[i] == v1.ServiceAffinityClientIP {
		svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr(clientIPTimeout)}}
	}
	for j, proto := range protocols {
		sp := &svc.Spec.Ports[j]
		sp.Name = "port-" + strconv.Itoa(j)
		sp.Protocol = proto
		sp.Port = int32(80 + j)
		sp.TargetPort = intstr.FromInt32(int32(8080 + j))
		if typ != v1.ServiceTypeClusterIP {
			sp.NodePort = int32(p.nodePort)
			p.nodePort++
		}
	}
	if typ != v1.ServiceTypeClusterIP {
		svc.Spec.ExternalTrafficPolicy = p.external[i]
	}
	if typ == v1.ServiceTypeLoadBalancer {
		svc.Spec.AllocateLoadBalancerNodePorts = ptr(true)
		if p.external[i] == v1.ServiceExternalTrafficPolicyLocal {
			svc.Spec.HealthCheckNodePort = int32(p.nodePort)
			p.nodePort++
		}
		svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: p.pools.lb.take(), IPMode: ptr(v1.LoadBalancerIPModeVIP)}}
	}
	return svc
}

// slicePorts are a Service's ports as its slices list them: by target
// port, sorted as the EndpointSlice controller sorts them (by name).
func slicePorts(svc *v1.Service) []discovery.EndpointPort {
	out := make([]discovery.EndpointPort, len(svc.Spec.Ports))
	for j := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[j]
		out[j] = discovery.EndpointPort{Name: ptr(sp.Name), Protocol: ptr(sp.Protocol), Port: ptr(sp.TargetPort.IntVal)}
	}
	slices.SortStableFunc(out, func(a, b discovery.EndpointPort) int {
		if *a.Name < *b.Name {
			return -1
		}
		if *a.Name > *b.Name {
			return 1
		}
		return 0
	})
	return out
}

// slices packs a Service's endpoints as the EndpointSlice controller packs
// a new Service's (k8s.io/endpointslice reconciler.go,
// reconcileByPortMapping: no slice to reuse, so each new slice is filled
// to maxEndpointsPerSlice before the next starts), in endpoint order. A
// Service without endpoints gets the controller's empty placeholder slice.
func (p *planned) slices(svc *v1.Service, conds []Condition, firstNode int, nodeNames, zones []string, trigger string) []*discovery.EndpointSlice {
	ports := slicePorts(svc)
	eps := make([]discovery.Endpoint, len(conds))
	// One backing array each for the endpoints' small fields.
	addrs := make([]string, len(conds))
	flags := make([]bool, 3*len(conds))
	nodes := make([]string, len(conds))
	for j, c := range conds {
		node := (firstNode + j) % p.Nodes
		addrs[j] = p.pools.pod.take()
		nodes[j] = nodeNames[node]
		ready, serving, terminating := &flags[3*j], &flags[3*j+1], &flags[3*j+2]
		*ready, *serving, *terminating = c.flags()
		eps[j] = discovery.Endpoint{
			Addresses:  addrs[j : j+1 : j+1],
			Conditions: discovery.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating},
			NodeName:   &nodes[j],
		}
		if zones[node] != "" {
			eps[j].Zone = &zones[node]
		}
	}
	count := (len(eps) + p.MaxEndpointsPerSlice - 1) / p.MaxEndpointsPerSlice
	if count == 0 {
		count, ports = 1, []discovery.EndpointPort{} // the placeholder
	}
	out := make([]*discovery.EndpointSlice, count)
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID, Controller: ptr(true), BlockOwnerDeletion: ptr(true)}
	for k := range out {
		lo, hi := k*p.MaxEndpointsPerSlice, min((k+1)*p.MaxEndpointsPerSlice, len(eps))
		out[k] = &discovery.EndpointSlice{
			TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta: metav1.ObjectMeta{
				Name:      svc.Name + "-" + strconv.Itoa(k),
				Namespace: svc.Namespace,
				Labels: map[string]string{
					discovery.LabelServiceName: svc.Name,
					discovery.LabelManagedBy:   "endpointslice-controller.k8s.io",
				},
				Annotations:     map[string]string{v1.EndpointsLastChangeTriggerTime: trigger},
				OwnerReferences: []metav1.OwnerReference{owner},
			},
			AddressType: discovery.AddressTypeIPv4,
			Endpoints:   eps[lo:hi:hi],
			Ports:       ports,
		}
	}
	return out
}

// containerPorts are the ports a Service's pods declare: its target ports.
func containerPorts(svc *v1.Service) []v1.ContainerPort {
	ports := make([]v1.ContainerPort, len(svc.Spec.Ports))
	for j := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[j]
		ports[j] = v1.ContainerPort{Name: sp.Name, ContainerPort: sp.TargetPort.IntVal, Protocol: sp.Protocol}
	}
	return ports
}

// pods are app's pods (a Service's endpoints, or a Deployment's replicas),
// labelled app: app, placed round the nodes from firstNode.
func (p *planned) pods(namespace, app string, ports []v1.ContainerPort, conds []Condition, firstNode int, nodeNames, zones []string) []*v1.Pod {
	out := make([]*v1.Pod, len(conds))
	created := metav1.NewTime(p.Created)
	for j, c := range conds {
		ip := p.pools.pod.take()
		status := v1.ConditionTrue
		if c != Ready {
			status = v1.ConditionFalse
		}
		out[j] = &v1.Pod{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{
				Name: app + "-" + strconv.Itoa(j), Namespace: namespace,
				Labels: map[string]string{"app": app},
			},
			Spec: v1.PodSpec{
				NodeName:   nodeNames[(firstNode+j)%p.Nodes],
				Containers: []v1.Container{{Name: "app", Image: pauseImage, Ports: ports}},
			},
			Status: v1.PodStatus{
				Phase:      v1.PodRunning,
				PodIP:      ip,
				PodIPs:     []v1.PodIP{{IP: ip}},
				Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: status, LastTransitionTime: created}},
			},
		}
	}
	return out
}

// flags are the slice conditions ready, serving, terminating.
func (c Condition) flags() (ready, serving, terminating bool) {
	switch c {
	case Ready:
		return true, true, false
	case ServingTerminating:
		return false, true, true
	case Terminating:
		return false, false, true
	}
	return false, false, false
}

func ptr[T any](v T) *T { return &v }

// stream is the seeded random source of one choice.
func stream(seed uint64, id uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, id)) }
