// Package netns is proxysim's real kernel: throwaway network namespaces, and
// the sim/ipvs interfaces (IPVS handle, sysctls, the kube-ipvs0 address
// binder) implemented inside one, plus topologies with real TCP and UDP
// servers to send traffic through them.
//
// Every namespace is named with Prefix, so that Sweep can remove what a
// killed run left behind. The host's own namespace is never changed: code
// runs inside a namespace on a locked OS thread that is restored afterwards
// (or, if restoring fails, discarded). Everything here needs root, and the
// IPVS parts need a kernel with ip_vs.
package netns
