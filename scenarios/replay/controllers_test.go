package replay_test

// The ingress-nginx controller registers itself when imported, for every
// test of the package (see modes_test.go).
import _ "github.com/proxysim/proxysim/scenarios/ingressnginx"
