package ipvsmode_test

import (
	"testing"
	"time"

	"github.com/proxysim/proxysim/fakes"
	"github.com/proxysim/proxysim/scenarios/ipvsmode"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim/ipvs"
)

// fakeClient stands in for a real kernel's client topology: the fake's
// connections, and ARP read from its arp_ignore and arp_announce.
type fakeClient struct {
	*fakes.IPVS
	sys *fakes.Sysctls
}

func (c fakeClient) ARP(string) (bool, error) {
	v, err := c.sys.Get(ipvs.SysctlArpIgnore)
	return v == 0, err
}

// ARPSender names the source itself while arp_announce is 0, else the
// node's address on the client's segment.
func (c fakeClient) ARPSender(src string) (string, error) {
	v, err := c.sys.Get(ipvs.SysctlArpAnnounce)
	if v == 0 {
		return src, err
	}
	return "10.0.0.1", err
}

// A scenario that talks to the node as a client gets the client binding,
// any other the node's; the client one keeps pace with real time.
func TestOnKernelWithClientChoosesAndPaces(t *testing.T) {
	var nodes, clients int
	factory := ipvsmode.OnKernelWithClient(
		func() (ipvs.Dataplane, func() error, error) {
			nodes++
			dp, _, _, _ := fakes.Dataplane("6.1.0", nil)
			return dp, func() error { return nil }, nil
		},
		func() (ipvs.Dataplane, ipvsmode.Client, func() error, error) {
			clients++
			dp, h, sys, _ := fakes.Dataplane("6.1.0", nil)
			return dp, fakeClient{h, sys}, func() error { return nil }, nil
		})
	withClient, err := parse(t, `name: x
proxy: {version: v1.36.3}
objects:
  - {apiVersion: v1, kind: Service, metadata: {name: web}, spec: {clusterIP: 10.96.0.10, ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]}}
  - apiVersion: discovery.k8s.io/v1
    kind: EndpointSlice
    metadata: {name: web-1, labels: {kubernetes.io/service-name: web}}
    addressType: IPv4
    ports: [{name: http, port: 8080, protocol: TCP}]
    endpoints: [{addresses: [10.244.1.2]}]
timeline:
  - at: 100ms
    connect: {name: c1, client: 10.0.0.5:40000, service: 10.96.0.10:80}
  - at: 300ms
    ipvs: {service: TCP 10.96.0.10:80, server: 10.244.1.2:8080, delete: true}
  - at: 300ms
    send: {conn: c1}
    expect:
      sends: {c1: reset}
      arp: {10.96.0.10: answered}
`)
	if err != nil {
		t.Fatal(err)
	}
	if !ipvsmode.NeedsClient(withClient) {
		t.Fatal("NeedsClient: a scenario with connect, send and arp needs none")
	}
	res, err := replay.Replay(withClient, replay.Options{Dataplane: factory})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed() || clients != 1 || nodes != 0 {
		t.Fatalf("passed %v, clients %d, nodes %d: %v", res.Passed(), clients, nodes, res.Failures)
	}
	// Pacing waits at least the virtual gaps; never less (a lower bound only).
	if res.Wall < 300*time.Millisecond {
		t.Fatalf("a 300ms story on a kernel took %v of real time: the kernel was not given its time", res.Wall)
	}

	nodeOnly, err := parse(t, "name: y\nproxy: {version: v1.36.3}\ntimeline: [{at: 1h, expect: {timeouts: {tcp: 15m}}}]\n")
	if err != nil {
		t.Fatal(err)
	}
	res, err = replay.Replay(nodeOnly, replay.Options{Dataplane: factory})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed() || clients != 1 || nodes != 1 || res.Wall > time.Minute {
		t.Fatalf("passed %v, clients %d, nodes %d, wall %v: %v", res.Passed(), clients, nodes, res.Wall, res.Failures)
	}
}
