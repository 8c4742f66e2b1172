package migrate

import (
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/proxysim/proxysim/scenarios"
)

// node is one Node of the dump, as the comparison needs it.
type node struct {
	Name string
	// IPs are its IPv4 InternalIP then ExternalIP addresses, the first
	// kube-proxy's nodeIP (its primary address).
	IPs []string
	// PodIP is an address of a pod on it (a client "pod on the node"), ""
	// when the dump shows none.
	PodIP          string
	Kernel, OS     string
	Ready          bool
	KubeletVersion string
}

// service is one Service of the dump with what decides its routes.
type service struct {
	Key       string // namespace/name
	Svc       *v1.Service
	Endpoints []endpoint // ready ones first, as the slices list them
}

type endpoint struct {
	IP, Node string
}

// cluster is the dump read once.
type cluster struct {
	Nodes    []*node // sorted by name
	Services []*service
}

func (c *cluster) node(name string) *node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// nodeOf is the node an address belongs to, nil if none.
func (c *cluster) nodeOf(ip string) *node {
	for _, n := range c.Nodes {
		if slices.Contains(n.IPs, ip) {
			return n
		}
	}
	return nil
}

// readCluster collects nodes, Services and endpoints from the loaded
// objects.
func readCluster(objs []scenarios.Object) (*cluster, error) {
	c := &cluster{}
	svcs := map[string]*service{}
	var slices_ []*discovery.EndpointSlice
	podByNode := map[string][]string{}
	for _, o := range objs {
		switch x := o.Obj.(type) {
		case *v1.Node:
			n := &node{Name: x.Name, Kernel: x.Status.NodeInfo.KernelVersion, OS: x.Status.NodeInfo.OSImage, KubeletVersion: x.Status.NodeInfo.KubeletVersion}
			for _, typ := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
				for _, a := range x.Status.Addresses {
					if ip := net.ParseIP(a.Address); a.Type == typ && ip != nil && ip.To4() != nil && !slices.Contains(n.IPs, a.Address) {
						n.IPs = append(n.IPs, a.Address)
					}
				}
			}
			for _, cond := range x.Status.Conditions {
				if cond.Type == v1.NodeReady && cond.Status == v1.ConditionTrue {
					n.Ready = true
				}
			}
			if ip, cidr, err := net.ParseCIDR(x.Spec.PodCIDR); err == nil && ip.To4() != nil {
				// An address near the top of the node's pod range: a pod
				// there, not one of the Service's endpoints.
				a := cidr.IP.To4()
				ones, _ := cidr.Mask.Size()
				if ones <= 24 {
					n.PodIP = net.IPv4(a[0], a[1], a[2], 200).String()
				}
			}
			c.Nodes = append(c.Nodes, n)
		case *v1.Service:
			key := x.Namespace + "/" + x.Name
			svcs[key] = &service{Key: key, Svc: x}
		case *discovery.EndpointSlice:
			slices_ = append(slices_, x)
		case *v1.Pod:
			if x.Spec.HostNetwork || x.Spec.NodeName == "" {
				continue
			}
			if ip := net.ParseIP(x.Status.PodIP); ip != nil && ip.To4() != nil {
				podByNode[x.Spec.NodeName] = append(podByNode[x.Spec.NodeName], x.Status.PodIP)
			}
		}
	}
	if len(c.Nodes) == 0 {
		return nil, fmt.Errorf("the dump has no Node objects: dump them too (kubectl get nodes,svc,endpointslices,pods -A -o yaml)")
	}
	sort.Slice(c.Nodes, func(i, j int) bool { return c.Nodes[i].Name < c.Nodes[j].Name })
	for _, n := range c.Nodes {
		if n.PodIP == "" && len(podByNode[n.Name]) > 0 {
			ps := podByNode[n.Name]
			sort.Strings(ps)
			n.PodIP = ps[0]
		}
	}
	sort.Slice(slices_, func(i, j int) bool {
		return slices_[i].Namespace+"/"+slices_[i].Name < slices_[j].Namespace+"/"+slices_[j].Name
	})
	for _, sl := range slices_ {
		s := svcs[sl.Namespace+"/"+sl.Labels[discovery.LabelServiceName]]
		if s == nil || sl.AddressType != discovery.AddressTypeIPv4 {
			continue
		}
		for _, e := range sl.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			n := ""
			if e.NodeName != nil {
				n = *e.NodeName
			}
			for _, a := range e.Addresses {
				s.Endpoints = append(s.Endpoints, endpoint{IP: a, Node: n})
			}
		}
	}
	for _, k := range sortedKeys(svcs) {
		c.Services = append(c.Services, svcs[k])
	}
	return c, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Entry kinds: how a client addresses a Service.
const (
	EntryClusterIP    = "ClusterIP"
	EntryNodePort     = "NodePort"
	EntryLoopback     = "NodePort on 127.0.0.1"
	EntryLoadBalancer = "LoadBalancer IP"
	EntryExternalIP   = "external IP"
)

// Client kinds: where a connection starts.
const (
	ClientPodSameNode  = "pod on the same node"
	ClientPodElsewhere = "pod on another node"
	ClientNode         = "the node itself"
	ClientOffCluster   = "off-cluster"
	ClientInRange      = "off-cluster, inside loadBalancerSourceRanges"
	ClientHairpin      = "an endpoint of the Service itself (hairpin)"
)

// offCluster is the off-cluster client's address (TEST-NET-2): outside
// every pod, node and Service range a dump is likely to hold.
const offCluster = "198.51.100.10"

// probe is one connection whose fate the two modes must agree on: a
// client at a place, an entry point, and the node whose rules see the
// packet first (Via) and, when it leaves that node unchanged for another
// node's address, the node that sees it next.
type probe struct {
	Service  *service
	PortName string
	Protocol string // tcp, udp, sctp
	Entry    string // an Entry kind
	To       string // ip:port
	Client   string // a Client kind
	From     string // the client's address
	Via      string // the node whose rules trace the packet first
}

// Key names the probe within its Service, stably.
func (p probe) Key() string {
	return fmt.Sprintf("%s %s %s from %s (%s) via %s", p.PortName, p.Entry, p.To, p.Client, p.From, p.Via)
}

// probes lists, for every Service port, every entry point and client the
// comparison traces.
func (c *cluster) probes() []probe {
	var out []probe
	for _, s := range c.Services {
		spec := s.Svc.Spec
		if spec.Type == v1.ServiceTypeExternalName {
			continue
		}
		for _, sp := range spec.Ports {
			proto := strings.ToLower(string(sp.Protocol))
			if proto == "" {
				proto = "tcp"
			}
			add := func(entry, ip string, port int32, client, from, via string) {
				if from == "" {
					return
				}
				out = append(out, probe{Service: s, PortName: portName(sp), Protocol: proto, Entry: entry,
					To: net.JoinHostPort(ip, strconv.Itoa(int(port))), Client: client, From: from, Via: via})
			}
			// ClusterIP: the client's own node handles it.
			if ip := net.ParseIP(spec.ClusterIP); ip != nil && ip.To4() != nil {
				for _, n := range c.Nodes {
					add(EntryClusterIP, spec.ClusterIP, sp.Port, ClientPodSameNode, n.PodIP, n.Name)
					add(EntryClusterIP, spec.ClusterIP, sp.Port, ClientNode, firstOf(n.IPs), n.Name)
				}
				if len(s.Endpoints) > 0 && c.node(s.Endpoints[0].Node) != nil {
					add(EntryClusterIP, spec.ClusterIP, sp.Port, ClientHairpin, s.Endpoints[0].IP, s.Endpoints[0].Node)
				}
			}
			// NodePort: on each node address, and loopback.
			if sp.NodePort != 0 && (spec.Type == v1.ServiceTypeNodePort || spec.Type == v1.ServiceTypeLoadBalancer) {
				for i, n := range c.Nodes {
					for _, a := range n.IPs {
						add(EntryNodePort, a, sp.NodePort, ClientPodSameNode, n.PodIP, n.Name)
						if len(c.Nodes) > 1 {
							m := c.Nodes[(i+1)%len(c.Nodes)]
							add(EntryNodePort, a, sp.NodePort, ClientPodElsewhere, m.PodIP, m.Name)
						}
						add(EntryNodePort, a, sp.NodePort, ClientNode, firstOf(n.IPs), n.Name)
						add(EntryNodePort, a, sp.NodePort, ClientOffCluster, offCluster, n.Name)
					}
					add(EntryLoopback, "127.0.0.1", sp.NodePort, ClientNode, "127.0.0.1", n.Name)
				}
			}
			// LoadBalancer and external IPs: the load balancer or the
			// network delivers to any node; pods and nodes meet their own
			// node's rules first.
			var ext [][2]string
			if spec.Type == v1.ServiceTypeLoadBalancer {
				for _, in := range s.Svc.Status.LoadBalancer.Ingress {
					if ip := net.ParseIP(in.IP); ip != nil && ip.To4() != nil {
						ext = append(ext, [2]string{EntryLoadBalancer, in.IP})
					}
				}
			}
			for _, a := range spec.ExternalIPs {
				if ip := net.ParseIP(a); ip != nil && ip.To4() != nil {
					ext = append(ext, [2]string{EntryExternalIP, a})
				}
			}
			inRange := ""
			if spec.Type == v1.ServiceTypeLoadBalancer {
				for _, r := range spec.LoadBalancerSourceRanges {
					if ip, cidr, err := net.ParseCIDR(strings.TrimSpace(r)); err == nil && ip.To4() != nil && !cidr.Contains(net.ParseIP(offCluster)) {
						a := cidr.IP.To4()
						inRange = net.IPv4(a[0], a[1], a[2], a[3]|1).String()
						break
					}
				}
			}
			for _, e := range ext {
				for _, n := range c.Nodes {
					add(e[0], e[1], sp.Port, ClientPodSameNode, n.PodIP, n.Name)
					add(e[0], e[1], sp.Port, ClientNode, firstOf(n.IPs), n.Name)
					add(e[0], e[1], sp.Port, ClientOffCluster, offCluster, n.Name)
					if e[0] == EntryLoadBalancer {
						add(e[0], e[1], sp.Port, ClientInRange, inRange, n.Name)
					}
				}
			}
		}
	}
	return out
}

func portName(sp v1.ServicePort) string {
	if sp.Name != "" {
		return sp.Name
	}
	return fmt.Sprintf("%d/%s", sp.Port, strings.ToUpper(string(sp.Protocol)))
}

func firstOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
