// Package iptables is kube-proxy v1.36's iptables proxier as a proxysim
// backend: at each sync it renders the `iptables-restore --noflush` payload
// for the filter and nat tables that kube-proxy would write for the same
// services and endpoints, hands it to a Dataplane, and fails the sync when
// the restore fails. It also parses the rules back (iptables-save text) and
// traces a packet through them with exact probabilities; its Walker,
// which also answers the ipset and xt_ipvs matches of the IPVS proxier's
// rules, is what sim/ipvs's tracer drives hook by hook.
//
// It defines the Dataplane interface; fakes/ and, later, netns/ implement
// it. It must not read the wall clock or import either of them.
//
// Modelled: the fixed chains, ClusterIP, NodePort, externalIP and
// LoadBalancer entry points with loadBalancerSourceRanges (the FW chains),
// Cluster and Local traffic policies, ClientIP affinity, no-endpoint REJECT
// and no-local-endpoint DROP rules, masquerade marks, stale-chain deletion,
// full and partial syncs, large-cluster mode (no service comments,
// throttled cleanup, no hourly full sync), kube-proxy's iptables metrics,
// IPv4 and IPv6. e2e/upstream compares it with kube-proxy's own proxier
// after every sync. Not modelled: nfacct rules (host-dependent), node-port
// addresses other than all, conntrack cleanup.
package iptables
