package migrate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeBigDump writes a cluster dump of nodes Nodes and services
// Services (every tenth a NodePort), each with endpoints spread over the
// nodes, and a kube-proxy configuration in mode beside it.
func writeBigDump(tb testing.TB, dir string, nodes, services, perService int, mode string) (cluster, config string) {
	tb.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for n := range nodes {
		fmt.Fprintf(&b, `- apiVersion: v1
  kind: Node
  metadata:
    name: node-%d
  spec:
    podCIDR: 10.%d.%d.0/24
  status:
    addresses:
    - {address: 192.168.%d.%d, type: InternalIP}
    conditions:
    - {type: Ready, status: "True"}
    nodeInfo: {kernelVersion: 6.1.0-31-amd64, osImage: Debian GNU/Linux 12 (bookworm), kubeletVersion: v1.33.4}
`, n, 200+n/256, n%256, n/256, 10+n%200)
	}
	for i := range services {
		typ, np := "ClusterIP", ""
		if i%10 == 0 {
			typ, np = "NodePort", fmt.Sprintf(", nodePort: %d", 30000+i/10%2700)
		}
		fmt.Fprintf(&b, `- apiVersion: v1
  kind: Service
  metadata: {name: svc-%d, namespace: ns-%d}
  spec:
    type: %s
    clusterIP: 10.%d.%d.%d
    ports:
    - {name: http, port: 80, protocol: TCP, targetPort: 8080%s}
- apiVersion: discovery.k8s.io/v1
  kind: EndpointSlice
  metadata:
    name: svc-%d-x7k2p
    namespace: ns-%d
    labels: {kubernetes.io/service-name: svc-%d}
  addressType: IPv4
  ports:
  - {name: http, port: 8080, protocol: TCP}
  endpoints:
`, i, i%50, typ, 96+i/65536, (i/256)%256, i%256, np, i, i%50, i)
		for j := range perService {
			e := i*perService + j
			fmt.Fprintf(&b, "  - {addresses: [10.%d.%d.%d], conditions: {ready: true}, nodeName: node-%d}\n", 128+e/65536, (e/256)%256, e%256, j%nodes)
		}
	}
	cluster = filepath.Join(dir, "cluster.yaml")
	config = filepath.Join(dir, "kube-proxy.yaml")
	if err := os.WriteFile(cluster, []byte(b.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	cfg := "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: " + mode + "\nclusterCIDR: 10.128.0.0/9\n"
	if err := os.WriteFile(config, []byte(cfg), 0o644); err != nil {
		tb.Fatal(err)
	}
	return cluster, config
}

// BenchmarkMigrate10kServices compares a 10,000-Service cluster (three
// nodes, three endpoints a Service, every tenth a NodePort) for each
// migration the issue names (IPVS -> nftables, IPVS -> iptables, iptables
// -> nftables): six replays, and every connection traced in both modes
// (see docs/explanation/performance.md#migrate).
func BenchmarkMigrate10kServices(b *testing.B) {
	for _, p := range pairs {
		b.Run(p[0]+"-to-"+p[1], func(b *testing.B) { benchmarkMigrate(b, p[0], p[1]) })
	}
}

func benchmarkMigrate(b *testing.B, from, to string) {
	cluster, config := writeBigDump(b, b.TempDir(), 3, benchServices, 3, from)
	b.ResetTimer()
	cpu0 := cpuSeconds()
	for range b.N {
		r, err := Compare(Options{Cluster: cluster, Config: config, To: to})
		if err != nil {
			b.Fatal(err)
		}
		if len(r.Services) != benchServices {
			b.Fatalf("%d services", len(r.Services))
		}
		b.ReportMetric(float64(r.Connections), "connections")
	}
	// The process's CPU time, besides the wall time: on a machine shared
	// with other jobs the wall time says as much about them. The peak
	// resident memory is the process's so far: run one sub-benchmark at a
	// time for its own.
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/op")
	b.ReportMetric(peakRSSMB(), "peak-RSS-MB")
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// peakRSSMB is the process's largest resident set so far, in MB (Linux
// reports it in KiB).
func peakRSSMB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) * 1024 / 1e6
}

var benchServices = 10000
