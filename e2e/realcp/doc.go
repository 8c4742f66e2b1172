// Package realcp runs kube-proxy the way users run it and compares it with
// proxysim's prediction of the same story, in real time: an embedded etcd
// v3.6.8 and kube-apiserver v1.36.3 in the test process, the kube-proxy
// v1.36.3 binary (built from this module, or KUBE_PROXY) in a throwaway
// network namespace on this host's kernel, a library scenario's objects
// and writes sent to the API server with client-go at their instants, and
// kube-proxy's view read from its -v=2 log, its /metrics and the kernel.
// See docs/realcp.md.
//
// It is a module of its own, like e2e/upstream (whose replace block it
// shares), because it needs k8s.io/kubernetes; everything is in _test.go
// files: `make realcp` (root).
package realcp
