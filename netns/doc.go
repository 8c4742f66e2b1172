// Package netns is proxysim's real kernel: throwaway network namespaces, and
// the sim/ipvs interfaces (IPVS handle, sysctls, the kube-ipvs0 address
// binder) implemented inside one, plus topologies with real TCP and UDP
// servers to send traffic through them; and sim/iptables' Dataplane through
// the real iptables of either backend (xtables-nft-multi or
// xtables-legacy-multi, never the host's alternatives), in a node namespace
// with pods made on demand, whose spreads of real connections are measured
// against predicted shares.
//
// Every namespace is named with Prefix and its creator's process ID, so that
// Sweep can remove what a killed run left behind and spare a running one's.
// The host's own namespace is never changed: code runs inside a namespace on
// a locked OS thread that is restored afterwards (or, if restoring fails,
// discarded), and a command runs only from such a thread. Everything here
// needs root; the IPVS parts need a kernel with ip_vs, the iptables and
// nftables parts their user-space tools: `proxysim doctor` (package doctor)
// says which are missing and how to install them.
package netns
