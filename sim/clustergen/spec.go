// Package clustergen makes a cluster from a spec: N Services with their
// endpoints (EndpointSlices, or Pods for an EndpointSlice controller to
// slice), the Nodes they run on, and every address allocated from CIDRs.
// The same Spec gives the same objects, byte for byte, on every run: each
// random choice comes from a seeded math/rand/v2 stream and nothing ranges
// over a map.
//
// It produces plain Kubernetes objects and knows nothing of the world,
// scenarios or proxies, so scenarios (`cluster: {generate: ...}`), the
// calibration of sync costs and cluster-scale runs share it. It must not
// import anything of proxysim beyond sim/vclock.
package clustergen

import (
	"cmp"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Spec describes a generated cluster. Zero fields take the defaults named
// on each. A Mix gives exact counts: of 20 Services, Types {ClusterIP: 3,
// NodePort: 1} makes exactly 15 ClusterIP and 5 NodePort Services, and the
// seed decides which ones.
type Spec struct {
	// Seed chooses which objects get which share of each Mix and where
	// endpoints run.
	Seed uint64
	// Namespace holds every Service, slice and Pod (default "gen").
	Namespace string
	// Services is how many Services there are: svc-00000, svc-00001, ...
	// (each with its own endpoints). Leave it 0 when Deployments is set.
	Services int
	// Deployments, if set, makes ClusterLoader2's load-test shape instead
	// of Services: in each of Namespaces namespaces, Deployments[r]
	// Deployments of r replicas each (deployments.go). Pods is then
	// implied, and EndpointsPerService is the Deployments' replicas.
	Deployments map[int]int
	// Namespaces is how many namespaces hold the Deployments (default 1):
	// Namespace-000, Namespace-001, ...
	Namespaces int
	// WithService is the share of each namespace's Deployments of each
	// replica count that have a Service in front, in hundredths of a
	// percent (10000: every one), rounded up; 0: none.
	WithService int
	// EndpointsPerService is the number of endpoints of each Service, as a
	// mix over the Services (default {1: 1}).
	EndpointsPerService Mix[int]
	// Ports is the number of ports of each Service, as a mix over the
	// Services (default {1: 1}), at most 100.
	Ports Mix[int]
	// Protocols is the protocol of each Service port, as a mix over every
	// port of the cluster (default TCP).
	Protocols Mix[v1.Protocol]
	// Types is each Service's type: ClusterIP, NodePort or LoadBalancer
	// (default ClusterIP).
	Types Mix[v1.ServiceType]
	// ExternalTrafficPolicy is the policy of each NodePort and
	// LoadBalancer Service, as a mix over those (default Cluster).
	ExternalTrafficPolicy Mix[v1.ServiceExternalTrafficPolicy]
	// InternalTrafficPolicy is each Service's internal traffic policy
	// (default Cluster).
	InternalTrafficPolicy Mix[v1.ServiceInternalTrafficPolicy]
	// SessionAffinity is each Service's affinity, None or ClientIP (default
	// None); ClientIP comes with the API server's 10800 s timeout.
	SessionAffinity Mix[v1.ServiceAffinity]
	// Conditions are the endpoints' conditions, as a mix over every
	// endpoint of the cluster (default Ready).
	Conditions Mix[Condition]
	// Nodes is how many Nodes the endpoints run on: node-000, node-001, ...
	// (default 1).
	Nodes int
	// Zones, if set, puts node i in zone i mod Zones: zone-a, zone-b, ...
	// (at most 26), and each endpoint carries its node's zone.
	Zones int
	// NodeZones, if set, is each node's zone (one per node, "" for none),
	// instead of Zones: a cluster of node pools, each in its zone.
	// NodeLabels, if set, are more labels of each node (one map per node).
	NodeZones  []string
	NodeLabels []map[string]string
	// ServiceCIDR holds the cluster IPs (default 10.96.0.0/12), PodCIDR the
	// endpoints' addresses (default 10.128.0.0/9), NodeCIDR the Nodes'
	// InternalIPs (default 192.168.0.0/16), LoadBalancerCIDR the
	// LoadBalancer ingress IPs (default 172.16.0.0/12). IPv4, not
	// overlapping.
	ServiceCIDR, PodCIDR, NodeCIDR, LoadBalancerCIDR string
	// NodePortRange is where node ports and health check node ports come
	// from, "FIRST-LAST" (default "30000-32767", the API server's).
	NodePortRange string
	// MaxEndpointsPerSlice is how many endpoints a slice takes before the
	// next one starts, as the EndpointSlice controller's
	// --max-endpoints-per-slice (default 100, at most 1000).
	MaxEndpointsPerSlice int
	// Pods makes a Pod for each endpoint (Services then select them)
	// instead of EndpointSlices: for an EndpointSlice controller to slice.
	// Only Ready and NotReady conditions apply.
	Pods bool
	// Created is when the objects were last changed: the slices' trigger
	// time and the Pods' Ready transition (default vclock.Epoch, when a
	// world starts).
	Created time.Time
}

// Mix is a share of each value, relative to the sum of the shares: {TCP: 9,
// UDP: 1} is 90% TCP. Shares are whole numbers, not negative, and at least
// one is positive.
type Mix[K cmp.Ordered] map[K]int

// Condition is an endpoint's state, as its slice conditions show it.
type Condition string

const (
	// Ready: ready, serving, not terminating.
	Ready Condition = "ready"
	// NotReady: neither ready nor serving, not terminating (a failing
	// readiness probe).
	NotReady Condition = "notReady"
	// ServingTerminating: terminating but still passing its readiness
	// probe (serving, not ready).
	ServingTerminating Condition = "servingTerminating"
	// Terminating: terminating and no longer serving.
	Terminating Condition = "terminating"
)

// Limits keep a spec's size within what one process holds.
const (
	MaxServices  = 1_000_000
	MaxEndpoints = 2_000_000
	MaxNodes     = 100_000
	MaxPorts     = 100
	// MaxNamespaces bounds Namespaces.
	MaxNamespaces = 10_000
)

// Naming: these are the names a scenario's steps refer to.
const (
	// DefaultNamespace holds the generated namespaced objects.
	DefaultNamespace = "gen"
	// ServiceName formats Service i's name; its slices are
	// ServiceName-0, -1, ... and its pods ServiceName-0, -1, ... too.
	serviceNameFormat = "svc-%05d"
	nodeNameFormat    = "node-%03d"
)

// NodeName is the name of generated node i: node-000, node-001, ...
func NodeName(i int) string { return fmt.Sprintf(nodeNameFormat, i) }
