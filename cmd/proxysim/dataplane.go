package main

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"k8s.io/utils/clock"

	"github.com/proxysim/proxysim/netns"
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/iptablesmode"
	"github.com/proxysim/proxysim/scenarios/ipvsmode"
	"github.com/proxysim/proxysim/scenarios/nftablesmode"
	"github.com/proxysim/proxysim/sim/ipvs"
)

// netnsIPTables is the iptables backend --dataplane netns programs for
// mode iptables (the --iptables flag).
var netnsIPTables = string(netns.NFT)

// netnsDataplane replays a scenario on this kernel, in fresh namespaces
// removed afterwards: IPVS for the IPVS mode, iptables (through the
// backend --iptables names) for the iptables mode, nftables through the
// real nft for the nftables mode. It is wired here, not in netns, so the
// kernel package never depends on the scenario format.
func netnsDataplane(s *scenarios.Scenario, clk clock.PassiveClock) (scenarios.Dataplane, error) {
	cleanupOnce.Do(cleanupNamespaces)
	switch s.Proxy.Mode {
	case iptablesmode.Name:
		return iptablesOnKernel(netns.IPTablesBackend(netnsIPTables))(s, clk)
	case nftablesmode.Name:
		return nftablesOnKernel(s, clk)
	}
	return ipvsOnKernel(s, clk)
}

var cleanupOnce sync.Once

// cleanupNamespaces removes what killed runs left (their namespaces), and
// makes an interrupt or a polite kill remove this run's before it exits;
// a SIGKILL leaves them to the next run.
func cleanupNamespaces() {
	if removed, err := netns.Sweep(); err == nil && len(removed) > 0 {
		fmt.Fprintf(os.Stderr, "removed %d namespaces left by killed runs\n", len(removed))
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		netns.Sweep() // this process's own, and any dead one's
		os.Exit(128 + int(s.(syscall.Signal)))
	}()
}

// ipvsOnKernel gives a scenario that talks to the node as a client a
// client and backends around it (netns.OpenTopology), and one with
// proxy.packetPath the whole packet path, pods around it, and its routes
// measured with real connections (netns.IPVSPathNode).
var ipvsOnKernel = ipvsmode.WithPacketPath(ipvsmode.OnKernelWithClient(netns.OpenDataplane, func() (ipvs.Dataplane, ipvsmode.Client, func() error, error) {
	dp, topo, closeFn, err := netns.OpenTopology()
	if err != nil {
		return dp, nil, nil, err
	}
	return dp, topo, closeFn, nil
}), func(nodeIPs []string) (ipvsmode.PathKernel, error) {
	n, err := netns.OpenIPVSPathNode(nodeIPs)
	if err != nil {
		return nil, err
	}
	return n, nil
})

var nftablesOnKernel = nftablesmode.OnKernel(func(nodeIPs []string) (nftablesmode.Kernel, error) {
	d, err := netns.OpenNFTablesDataplane(nodeIPs)
	if err == nil {
		lastKernel = d
	}
	return d, err
})

func iptablesOnKernel(b netns.IPTablesBackend) scenarios.DataplaneFactory {
	return iptablesmode.OnKernel(func(nodeIPs []string) (iptablesmode.Kernel, error) {
		d, err := netns.OpenIPTablesDataplane(b, nodeIPs)
		if err == nil {
			lastKernel = d
		}
		return d, err
	})
}

// lastKernel is the kernel dataplane the last replay on --dataplane netns
// opened (replays run one after another): --kernel-times reads its syncs'
// kernel times after the replay.
var lastKernel interface {
	SyncKernelTimes() []netns.KernelTime
}

// checkIPTablesBackend refuses a backend name before anything runs.
func checkIPTablesBackend(name string) error {
	switch netns.IPTablesBackend(name) {
	case netns.NFT, netns.Legacy:
		return nil
	}
	return fmt.Errorf("unknown iptables backend %q (available: nft, legacy)", name)
}
