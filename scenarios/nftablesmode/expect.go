package nftablesmode

import (
	"fmt"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/scenarios/routeexpect"
	"github.com/proxysim/proxysim/sim/route"
)

// tableExpect is the nftables golden: the kube-proxy table as the Fake
// dumps it (an `nft -f` transaction), inline or in a file.
type tableExpect struct {
	NFTables     *string `yaml:"nftables"`
	NFTablesFile string  `yaml:"nftablesFile"`
	Src          scenarios.Src
}

func (e *tableExpect) golden() scenarios.Golden {
	return scenarios.Golden{Key: "nftables", FileKey: "nftablesFile", Inline: e.NFTables, File: e.NFTablesFile, Src: e.Src}
}

func (e *tableExpect) Validate(v *scenarios.Validator) { e.golden().Validate(v) }
func (e *tableExpect) Check(r *replay.Run)             { r.CheckGolden(e.golden(), nil) }

// routeExpectation is the `route` expectation over the tracer: numgen
// splits are exact, so shares must match exactly.
var routeExpectation = routeexpect.New(func(r *replay.Run, pkt route.Packet, again *time.Duration) (route.Shares, error) {
	d := dataplaneOf(r)
	if d == nil {
		return nil, fmt.Errorf("the %s dataplane has no tracer", r.Dataplane().Name())
	}
	return d.Route(pkt, again)
}, nil, true)

// metricsExpect checks kube-proxy's nftables metrics as exact counts:
// `nftablesMetrics: {syncFailures, cleanupFailures, fullSyncs,
// partialSyncs, noLocalEndpointsInternal, noLocalEndpointsExternal}`,
// each optional. Counters add up over restarts; the gauges are the
// current proxier's.
type metricsExpect struct {
	Metrics *metricsWant `yaml:"nftablesMetrics"`
}

type metricsWant struct {
	SyncFailures             *int `yaml:"syncFailures"`
	CleanupFailures          *int `yaml:"cleanupFailures"`
	FullSyncs                *int `yaml:"fullSyncs"`
	PartialSyncs             *int `yaml:"partialSyncs"`
	NoLocalEndpointsInternal *int `yaml:"noLocalEndpointsInternal"`
	NoLocalEndpointsExternal *int `yaml:"noLocalEndpointsExternal"`
	Src                      scenarios.Src
}

func (m *metricsWant) fields() []struct {
	key  string
	want *int
} {
	return []struct {
		key  string
		want *int
	}{
		{"syncFailures", m.SyncFailures}, {"cleanupFailures", m.CleanupFailures},
		{"fullSyncs", m.FullSyncs}, {"partialSyncs", m.PartialSyncs},
		{"noLocalEndpointsInternal", m.NoLocalEndpointsInternal}, {"noLocalEndpointsExternal", m.NoLocalEndpointsExternal},
	}
}

func (e *metricsExpect) Validate(v *scenarios.Validator) {
	m := e.Metrics
	if m == nil {
		return
	}
	n := 0
	for _, f := range m.fields() {
		if f.want != nil {
			n++
			if *f.want < 0 {
				v.Errorf(m.Src.At(f.key), "must not be negative")
			}
		}
	}
	if n == 0 {
		v.Errorf(scenarios.Pos{Line: m.Src.Line, Column: m.Src.Column, Path: m.Src.Path}, "say which metric to expect: syncFailures, cleanupFailures, fullSyncs, partialSyncs, noLocalEndpointsInternal or noLocalEndpointsExternal")
	}
}

func (e *metricsExpect) Check(r *replay.Run) {
	m := e.Metrics
	if m == nil {
		return
	}
	d := dataplaneOf(r)
	if d == nil {
		return
	}
	got := d.Metrics()
	have := map[string]int{
		"syncFailures": got.SyncFailures, "cleanupFailures": got.CleanupFailures,
		"fullSyncs": got.FullSyncs, "partialSyncs": got.PartialSyncs,
		"noLocalEndpointsInternal": got.NoLocalEndpointsInternal, "noLocalEndpointsExternal": got.NoLocalEndpointsExternal,
	}
	for _, f := range m.fields() {
		if f.want != nil && *f.want != have[f.key] {
			r.Fail(m.Src.At(f.key), "nftablesMetrics."+f.key, fmt.Sprint(*f.want), fmt.Sprint(have[f.key]))
		}
	}
}

// transactionFault makes the next N nft transactions fail:
// `fault: {transactionFailures: N}`. A stale-chain cleanup is a
// transaction too.
type transactionFault struct {
	TransactionFailures int `yaml:"transactionFailures"`
	Src                 scenarios.Src
}

func (f *transactionFault) Validate(v *scenarios.Validator) {
	if f.TransactionFailures < 1 {
		v.Errorf(f.Src.At("transactionFailures"), "want at least 1 failing transaction (or leave transactionFailures out)")
	}
}

func (f *transactionFault) Do(r *replay.Run) error {
	if n := f.TransactionFailures; n > 0 {
		r.Step("fault", "", fmt.Sprintf("next %d transactions fail", n))
		if d := dataplaneOf(r); d != nil {
			d.faults.FailNext(n)
		}
	}
	return nil
}
