// Package nftables is kube-proxy v1.36's nftables proxier as a proxysim
// backend, built on sigs.k8s.io/knftables as kube-proxy is: it programs a
// knftables.Interface — knftables.Fake in a simulation, the real `nft` in
// production — with the `kube-proxy` table, its base chains, the
// service-ips / service-nodeports / no-endpoint-* / cluster-ips / ...
// sets and maps, and per service-port and per endpoint chains named as
// kube-proxy names them (pkg/proxy/nftables/proxier.go, syncProxyRules and
// setupNFTables). Syncs are partial (only changed services' chains, element
// diffs) except at start, after a failure and hourly; stale chains are
// flushed at once and deleted by a sync more than a second later; a failed
// transaction fails the sync.
//
// It also traces a packet through the table (route.go, ruleparse.go) with
// exact shares, and keeps a knftables.Fake in step with a real table
// (Mirror) so that a real kernel can be traced and compared. It must not
// read the wall clock, and must not import fakes or netns.
//
// Not modelled: loadBalancerSourceRanges (the firewall- chains; the
// firewall-ips map stays empty), interface-based local-traffic detectors,
// dual-stack (one proxier serves one family), conntrack cleanup and the
// health-check servers.
package nftables
