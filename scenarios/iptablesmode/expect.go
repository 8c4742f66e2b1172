package iptablesmode

import (
	"fmt"
	"math/big"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/scenarios/routeexpect"
	"github.com/proxysim/proxysim/sim/iptables"
	"github.com/proxysim/proxysim/sim/route"
)

// tableExpect is the iptables golden: iptables-save of filter and nat,
// inline or in a file.
type tableExpect struct {
	IPTables     *string `yaml:"iptables"`
	IPTablesFile string  `yaml:"iptablesFile"`
	Src          scenarios.Src
}

func (e *tableExpect) golden() scenarios.Golden {
	return scenarios.Golden{Key: "iptables", FileKey: "iptablesFile", Inline: e.IPTables, File: e.IPTablesFile, Src: e.Src}
}

func (e *tableExpect) Validate(v *scenarios.Validator) { e.golden().Validate(v) }
func (e *tableExpect) Check(r *replay.Run)             { r.CheckGolden(e.golden(), nil) }

// routeExpectation is the `route` expectation (scenarios/routeexpect, the
// same YAML in every mode with a tracer), traced with the clients' history
// of connection steps. kube-proxy prints probabilities with ten decimals,
// so 1/3 is written 0.3333333333 and the exact share of a path differs
// from 1/n by up to about 1e-10 per probabilistic rule on it: a traced
// share may be 1e-9 from the expected one.
var routeExpectation = routeexpect.New(func(r *replay.Run, pkt route.Packet, _ *time.Duration) (route.Shares, error) {
	shares, _, err := dataplaneOf(r).Route(pkt)
	return shares, err
}, big.NewRat(1, 1_000_000_000), false)

// validatePacket checks a connection's from, to and protocol fields.
func validatePacket(v *scenarios.Validator, src scenarios.Src, from, to, protocol string) iptables.Packet {
	pkt := iptables.Packet{Src: net.ParseIP(from)}
	if pkt.Src == nil {
		v.Errorf(src.At("from"), "want an IP address, got %q", from)
	}
	host, port, err := net.SplitHostPort(to)
	n, perr := strconv.Atoi(port)
	if pkt.Dst = net.ParseIP(host); err != nil || pkt.Dst == nil || perr != nil || n < 1 || n > 65535 {
		v.Errorf(src.At("to"), "want ip:port, got %q", to)
	}
	pkt.DPort = n
	switch strings.ToUpper(protocol) {
	case "", "TCP":
		pkt.Protocol = "tcp"
	case "UDP", "SCTP":
		pkt.Protocol = strings.ToLower(protocol)
	default:
		v.Errorf(src.At("protocol"), "want TCP, UDP or SCTP, got %q", protocol)
	}
	return pkt
}

// restoreFault makes the next N restores fail: `fault: {restoreFailures: N}`.
type restoreFault struct {
	RestoreFailures int `yaml:"restoreFailures"`
	Src             scenarios.Src
}

func (f *restoreFault) Validate(v *scenarios.Validator) {
	if f.RestoreFailures < 0 {
		v.Errorf(f.Src.At("restoreFailures"), "must not be negative")
	} else if f.RestoreFailures == 0 {
		// A fault of no restores would inject nothing: a typo, not a story.
		v.Errorf(f.Src.At("restoreFailures"), "want at least 1 failing restore (or leave restoreFailures out)")
	}
}

func (f *restoreFault) Do(r *replay.Run) error {
	if n := f.RestoreFailures; n > 0 {
		r.Step("fault", "", fmt.Sprintf("next %d restores fail", n))
		dataplaneOf(r).faults.FailNext(n)
	}
	return nil
}
