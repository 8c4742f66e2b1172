package sim

import (
	"fmt"
	"strings"
	"time"
)

// SyncWork is what one sync of the proxy wrote to its dataplane and read
// back from it, counted by the mode's proxier as it made the calls (failed
// calls included: the kernel did the work of refusing them). It is the input
// of a work-based sync cost (CostModel.Work) and the detail of a sync's
// run.work trace event. Exactly one mode's section is set when the backend
// reported its work; none when the sync never reached the backend (the
// proxy not yet initialized, a failure injected with FailSyncs) or the
// backend reports nothing (RecordingBackend). See docs/sync-work.md.
//
// Its sections are shared with SyncRecord copies: read them, never change
// them.
type SyncWork struct {
	// ServicePorts and Endpoints are the proxy's size once the sync is
	// done: what CostModel's linear terms count. The world fills them
	// whatever the backend.
	ServicePorts, Endpoints int
	// Full says the backend decided on a full sync (every mode has full and
	// partial syncs here; see each mode's Proxier.Sync).
	Full bool

	IPTables *IPTablesWork
	NFTables *NFTablesWork
	IPVS     *IPVSWork
}

// Mode names the mode that reported the work: "iptables", "nftables",
// "ipvs", or "" when none did.
func (w SyncWork) Mode() string {
	switch {
	case w.IPTables != nil:
		return "iptables"
	case w.NFTables != nil:
		return "nftables"
	case w.IPVS != nil:
		return "ipvs"
	}
	return ""
}

// String is the work in one line, as the run.work trace event shows it.
func (w SyncWork) String() string {
	kind := "partial"
	if w.Full {
		kind = "full"
	}
	var b strings.Builder
	switch {
	case w.IPTables != nil:
		fmt.Fprintf(&b, "iptables %s: %s", kind, w.IPTables)
	case w.NFTables != nil:
		fmt.Fprintf(&b, "nftables %s: %s", kind, w.NFTables)
	case w.IPVS != nil:
		fmt.Fprintf(&b, "ipvs %s: %s", kind, w.IPVS)
	default:
		b.WriteString("no dataplane work reported")
	}
	fmt.Fprintf(&b, "; size %d service ports, %d endpoints", w.ServicePorts, w.Endpoints)
	return b.String()
}

// IPTablesWork is one iptables sync's work, as kube-proxy v1.36's
// syncProxyRules (pkg/proxy/iptables/proxier.go) does it: on a full sync
// the jumps from the built-in chains are ensured one `iptables` call at a
// time; every sync reads the nat table back with `iptables-save -t nat`
// (at most once per syncPeriod in large-cluster mode) to find stale
// chains, then writes one `iptables-restore --noflush` payload with a
// filter and a nat section. The canary monitor's reads are not part of
// any sync: it runs on its own timer.
type IPTablesWork struct {
	// Restores counts iptables-restore calls: 1, or 0 when the sync failed
	// before its restore.
	Restores int
	// Filter and NAT are the restore payload's two sections.
	Filter, NAT RestoreSection
	// EnsureChains and EnsureRules count the full sync's calls that make
	// sure kube-proxy's chains and the jumps into them exist
	// (iptablesJumpChains: EnsureChain, then EnsureRule with Prepend).
	EnsureChains, EnsureRules int
	// Saves counts iptables-save calls (`-t nat`); SavedLines and
	// SavedBytes what they returned.
	Saves                  int
	SavedLines, SavedBytes int
	// TableRules is the rules kube-proxy owns in both tables once the sync
	// is done (kube-proxy's sync_proxy_rules_iptables_total, summed): not
	// work, the table's size. iptables-legacy replaces a whole table per
	// restore, so even a small partial payload costs what the table holds.
	TableRules int
}

// RestoreSection is one table's section of an iptables-restore payload,
// from its `*table` line to its COMMIT.
type RestoreSection struct {
	// Lines and Bytes count the whole section, newlines included, its
	// `*table` and COMMIT lines too.
	Lines, Bytes int
	// Chains counts chain lines (`:CHAIN - [0:0]`), each creating or
	// flushing a chain: a chain written anew, or a stale one flushed
	// before its deletion.
	Chains int
	// Rules counts `-A` lines: what kube-proxy's
	// sync_proxy_rules_iptables_last gauge counts for the table.
	Rules int
	// DeletedChains counts `-X` lines (stale service chains, nat only).
	DeletedChains int
}

// Total is the payload: both sections together.
func (w *IPTablesWork) Total() RestoreSection {
	return RestoreSection{
		Lines: w.Filter.Lines + w.NAT.Lines, Bytes: w.Filter.Bytes + w.NAT.Bytes,
		Chains: w.Filter.Chains + w.NAT.Chains, Rules: w.Filter.Rules + w.NAT.Rules,
		DeletedChains: w.Filter.DeletedChains + w.NAT.DeletedChains,
	}
}

func (s RestoreSection) String() string {
	return fmt.Sprintf("%d lines %d B (%d chains, %d rules, %d deleted)", s.Lines, s.Bytes, s.Chains, s.Rules, s.DeletedChains)
}

func (w *IPTablesWork) String() string {
	return fmt.Sprintf("restore %d: filter %s, nat %s; save %d (%d lines %d B); ensure %d chains %d rules",
		w.Restores, w.Filter, w.NAT, w.Saves, w.SavedLines, w.SavedBytes, w.EnsureChains, w.EnsureRules)
}

// NFTVerb is an nft transaction verb, as knftables.Transaction has them.
type NFTVerb int

// The verbs kube-proxy's nftables proxier uses (it never resets or
// destroys).
const (
	NFTAdd NFTVerb = iota
	NFTCreate
	NFTInsert
	NFTReplace
	NFTFlush
	NFTDelete
	NFTVerbs // how many
)

var nftVerbNames = [NFTVerbs]string{"add", "create", "insert", "replace", "flush", "delete"}

func (v NFTVerb) String() string {
	if v < 0 || v >= NFTVerbs {
		return fmt.Sprintf("NFTVerb(%d)", int(v))
	}
	return nftVerbNames[v]
}

// NFTObject is the type of object an nft operation names.
type NFTObject int

// The object types kube-proxy's nftables proxier writes.
const (
	NFTTable NFTObject = iota
	NFTChain
	NFTRule
	NFTSet
	NFTMap
	NFTElement
	NFTObjects // how many
)

var nftObjectNames = [NFTObjects]string{"table", "chain", "rule", "set", "map", "element"}

func (o NFTObject) String() string {
	if o < 0 || o >= NFTObjects {
		return fmt.Sprintf("NFTObject(%d)", int(o))
	}
	return nftObjectNames[o]
}

// NFTOps counts transaction operations by verb and object type:
// ops[NFTAdd][NFTRule] is the rules added.
type NFTOps [NFTVerbs][NFTObjects]int

// Total is the number of operations.
func (o *NFTOps) Total() int {
	n := 0
	for v := range o {
		for _, c := range o[v] {
			n += c
		}
	}
	return n
}

// String lists the non-zero counts, verb by verb: "add chain 2, add rule
// 4, flush chain 2".
func (o *NFTOps) String() string {
	var parts []string
	for v := NFTVerb(0); v < NFTVerbs; v++ {
		for t := NFTObject(0); t < NFTObjects; t++ {
			if n := o[v][t]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %s %d", v, t, n))
			}
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// NFTablesWork is one nftables sync's work, as kube-proxy v1.36's
// syncProxyRules (pkg/proxy/nftables/proxier.go) does it (FACTS §3.3, §8):
// a separate transaction deleting stale chains flushed more than a second
// before, when there are any; on a full sync, setupNFTables and a listing
// of every set's and map's elements (nftElementStorage.readOrReset); on
// every sync one listing of the whole table (ListAll, `nft list table`);
// then one transaction: element diffs, and the chains of the services it
// rewrites.
type NFTablesWork struct {
	// Transactions counts `nft -f` runs: the sync's own, plus the
	// stale-chain deletion's when it ran.
	Transactions int
	// Ops counts the operations of all of them by verb and object type.
	Ops NFTOps
	// ChainsRewritten counts chains added and flushed to be written anew
	// (base and fixed chains on a full sync, the chains of the services
	// the sync rewrites); StaleChainsFlushed those flushed because nothing
	// refers to them any more, and StaleChainsDeleted those deleted, a
	// sync after their flush.
	ChainsRewritten, StaleChainsFlushed, StaleChainsDeleted int
	// Listings counts ListAll calls (one per sync) and ObjectsListed the
	// names they returned, of every type.
	Listings, ObjectsListed int
	// ElementListings counts ListElements calls (a full sync reads each of
	// the proxier's sets and maps back) and ElementsListed the elements
	// they returned.
	ElementListings, ElementsListed int
}

// ElementsAdded is the number of elements added (a changed map element is
// deleted and added again).
func (w *NFTablesWork) ElementsAdded() int { return w.Ops[NFTAdd][NFTElement] }

// ElementsDeleted is the number of elements deleted.
func (w *NFTablesWork) ElementsDeleted() int { return w.Ops[NFTDelete][NFTElement] }

func (w *NFTablesWork) String() string {
	return fmt.Sprintf("transactions %d, ops %d (%s); elements +%d -%d; chains rewritten %d, stale flushed %d, stale deleted %d; table listed %d (%d objects), elements listed %d (%d)",
		w.Transactions, w.Ops.Total(), &w.Ops, w.ElementsAdded(), w.ElementsDeleted(),
		w.ChainsRewritten, w.StaleChainsFlushed, w.StaleChainsDeleted, w.Listings, w.ObjectsListed, w.ElementListings, w.ElementsListed)
}

// IPVSWork is one IPVS sync's netlink calls, by kind, made by proxysim's
// IPVS proxier (sim/ipvs), whose full sync leaves the kernel as kube-proxy
// v1.36's syncProxyRules (pkg/proxy/ipvs/proxier.go) does but with fewer
// reads (see docs/sync-work.md); its graceful termination's calls count
// with the sync that made them, not those of its periodic check.
type IPVSWork struct {
	VirtualServersAdded, VirtualServersUpdated, VirtualServersDeleted int
	// RealServersUpdated includes graceful termination's weight-0 updates.
	RealServersAdded, RealServersUpdated, RealServersDeleted int
	// AddressesBound and AddressesUnbound are kube-ipvs0 address changes;
	// DeviceEnsures the checks that kube-ipvs0 exists.
	AddressesBound, AddressesUnbound, DeviceEnsures int
	// Listings: the virtual servers (one dump), each virtual server's real
	// servers, kube-ipvs0's addresses; and what they returned.
	VirtualServerListings, VirtualServersListed int
	RealServerListings, RealServersListed       int
	AddressListings, AddressesListed            int

	// IPSets and IPTables are the IPVS mode's ipset work and its
	// iptables work (chains and jumps ensured, one restore), which
	// kube-proxy does at every sync; nil when the proxier writes no ipsets
	// and rules (the IPVS mode's packetPath off).
	IPSets   *IPSetWork
	IPTables *IPTablesWork
}

// IPSetWork is the IPVS mode's ipset work in one sync: every set listed,
// then the members added and deleted (see IPVSWork.IPSets).
type IPSetWork struct {
	// Listings counts set listings and EntriesListed what they returned.
	Listings, EntriesListed int
	// EntriesAdded and EntriesDeleted count entry changes.
	EntriesAdded, EntriesDeleted int
}

// NetlinkCalls is every netlink call of the sync: writes and listings.
func (w *IPVSWork) NetlinkCalls() int {
	return w.VirtualServersAdded + w.VirtualServersUpdated + w.VirtualServersDeleted +
		w.RealServersAdded + w.RealServersUpdated + w.RealServersDeleted +
		w.AddressesBound + w.AddressesUnbound + w.DeviceEnsures +
		w.VirtualServerListings + w.RealServerListings + w.AddressListings
}

func (w *IPVSWork) String() string {
	return fmt.Sprintf("virtual servers +%d ~%d -%d, real servers +%d ~%d -%d, addresses +%d -%d, device %d; listed virtual servers %d (%d), real servers %d (%d), addresses %d (%d)",
		w.VirtualServersAdded, w.VirtualServersUpdated, w.VirtualServersDeleted,
		w.RealServersAdded, w.RealServersUpdated, w.RealServersDeleted,
		w.AddressesBound, w.AddressesUnbound, w.DeviceEnsures,
		w.VirtualServerListings, w.VirtualServersListed, w.RealServerListings, w.RealServersListed,
		w.AddressListings, w.AddressesListed)
}

// WorkReporter is a backend that reports the work of its syncs. The world
// calls TakeSyncWork right after each sync of the proxy returns; it returns
// the work of the backend's sync since the last call, and false when the
// backend has not synced since.
type WorkReporter interface {
	TakeSyncWork() (SyncWork, bool)
}

// WorkCost turns the work of one runner run into virtual time
// (CostModel.Work). It is called once per run, right after the proxier
// computed the sync and before virtual time moves: the run then ends
// SyncCost(work) later (plus the model's linear part). It must be
// deterministic, and must not keep work's sections.
type WorkCost interface {
	SyncCost(work SyncWork) time.Duration
}

// CostSplitter is a WorkCost that can tell what a sync's cost is made of.
type CostSplitter interface {
	WorkCost
	SplitCost(work SyncWork) CostSplit
}

// CostSplit is a WorkCost's split of one sync's cost: the kind of sync it
// priced it as, the kernel's writes and listings, and the proxy's
// compute, adding up to SyncCost. By names the cost ("" for no split).
type CostSplit struct {
	By                      string
	Kind                    string
	Write, Listing, Compute time.Duration
}

// WorkCostFunc adapts a function to WorkCost.
type WorkCostFunc func(SyncWork) time.Duration

func (f WorkCostFunc) SyncCost(w SyncWork) time.Duration { return f(w) }

func (f WorkCostFunc) String() string { return "a function of the sync's work" }
