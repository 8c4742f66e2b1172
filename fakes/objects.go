// Package fakes holds in-memory stand-ins for the cluster and the kernel:
// object builders for tests and benchmarks, and a kernel-faithful IPVS with
// a connection table on an injected clock, sysctls, a dummy device, ipsets
// and iptables, implementing the sim/ipvs and sim/iptables interfaces; and
// counters of what reaches the iptables, nftables and IPVS fakes, which
// tests hold each sync's reported work to (sim.SyncWork). They test the
// engine in sim/ and are the IPVS mode's fake dataplane
// (scenarios/ipvsmode); sim must never need them.
package fakes

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Service builds a ClusterIP service with one TCP port named "http".
func Service(namespace, name, clusterIP string, port int32) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			ClusterIP:  clusterIP,
			ClusterIPs: []string{clusterIP},
			Ports:      []v1.ServicePort{{Name: "http", Port: port, Protocol: v1.ProtocolTCP}},
		},
	}
}

// EndpointSlice builds a slice for service with one ready endpoint per
// address, on port "http".
func EndpointSlice(namespace, name, service string, port int32, addresses ...string) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: name,
			Labels: map[string]string{discovery.LabelServiceName: service},
		},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for _, a := range addresses {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{
			Addresses:  []string{a},
			Conditions: discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
		})
	}
	return s
}

// Cluster builds n services, each with one slice of perService endpoints:
// service i has cluster IP 10.96.x.y and endpoints 10.244.x.y.
func Cluster(n, perService int) ([]*v1.Service, []*discovery.EndpointSlice) {
	svcs := make([]*v1.Service, 0, n)
	slices := make([]*discovery.EndpointSlice, 0, n)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("svc-%05d", i)
		svcs = append(svcs, Service("default", name, ipAt(10, 96, i+1), 80))
		addrs := make([]string, perService)
		for j := range addrs {
			addrs[j] = ipAt(10, 128, i*perService+j+1)
		}
		slices = append(slices, EndpointSlice("default", name+"-abc", name, 8080, addrs...))
	}
	return svcs, slices
}

func ipAt(a, b, n int) string {
	return fmt.Sprintf("%d.%d.%d.%d", a, b+n/65536, (n/256)%256, n%256)
}
