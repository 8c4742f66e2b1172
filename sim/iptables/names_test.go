package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/proxysim/proxysim/sim/proxy"
)

func spn(ns, name, port string, proto v1.Protocol) proxy.ServicePortName {
	return proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}, Port: port, Protocol: proto}
}

// Values printed in kube-proxy v1.36's pkg/proxy/iptables/proxier_test.go
// golden dumps (and measured, FACTS §3.2).
func TestChainNamesMatchUpstream(t *testing.T) {
	p80 := spn("ns1", "svc1", "p80", v1.ProtocolTCP)
	dns := spn("kube-system", "kube-dns", "dns", v1.ProtocolUDP)
	for _, c := range []struct{ got, want string }{
		{ServiceChain(PrefixSVC, p80), "KUBE-SVC-XPGD46QRK7WJZT7O"},
		{ServiceChain(PrefixSVL, p80), "KUBE-SVL-XPGD46QRK7WJZT7O"},
		{ServiceChain(PrefixEXT, p80), "KUBE-EXT-XPGD46QRK7WJZT7O"},
		{EndpointChain(p80, "10.180.0.1:80"), "KUBE-SEP-SXIVWICOYRO3J4NJ"},
		{ServiceChain(PrefixSVC, dns), "KUBE-SVC-TCOU7JCQXEZGVUNU"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
}

// The documented algorithm, written out independently: base32 (standard
// alphabet, padded) of SHA-256 over "ns/name:port" + lower-case protocol
// (+ "ip:port"), first 16 characters.
func TestChainNamesFollowTheDocumentedAlgorithm(t *testing.T) {
	for _, c := range []struct {
		n        proxy.ServicePortName
		key, ep  string
		unnamed  bool
		wantPref string
	}{
		{n: spn("default", "web", "http", v1.ProtocolTCP), key: "default/web:httptcp"},
		{n: spn("default", "web", "", v1.ProtocolUDP), key: "default/webudp"},
		{n: spn("default", "web", "http", v1.ProtocolTCP), key: "default/web:httptcp10.244.1.2:8080", ep: "10.244.1.2:8080"},
	} {
		sum := sha256.Sum256([]byte(c.key))
		want := base32.StdEncoding.EncodeToString(sum[:])[:16]
		got := ServiceChain(PrefixSVC, c.n)[len(PrefixSVC):]
		if c.ep != "" {
			got = EndpointChain(c.n, c.ep)[len(PrefixSEP):]
		}
		if got != want {
			t.Errorf("%q: got %s, want %s", c.key, got, want)
		}
		if len(PrefixSEP)+len(got) > 28 {
			t.Errorf("%q: chain name over 28 characters", c.key)
		}
	}
}

func TestProbabilityIsPrintedWithTenDecimals(t *testing.T) {
	want := map[int]string{1: "1.0000000000", 2: "0.5000000000", 3: "0.3333333333", 4: "0.2500000000", 5: "0.2000000000"}
	for n := 1; n <= 5; n++ {
		if got := Probability(n); got != want[n] {
			t.Errorf("Probability(%d) = %s, want %s", n, got, want[n])
		}
	}
	if got := (Config{}).mark(); got != "0x00004000" {
		t.Errorf("mark = %s, want 0x00004000 (kube-proxy's %%#08x of 1<<14)", got)
	}
}
