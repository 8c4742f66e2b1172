package iptablesmode

import (
	"fmt"
	"maps"
	"slices"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
)

// Metrics is the `iptablesMetrics` expectation: kube-proxy's iptables
// metrics as the proxier holds them now, each field optional.
type Metrics struct {
	RestoreFailures        *int           `yaml:"restoreFailures"`
	PartialRestoreFailures *int           `yaml:"partialRestoreFailures"`
	FullSyncs              *int           `yaml:"fullSyncs"`
	PartialSyncs           *int           `yaml:"partialSyncs"`
	RulesTotal             map[string]int `yaml:"rulesTotal"`
	RulesLast              map[string]int `yaml:"rulesLast"`
	NoLocalEndpoints       map[string]int `yaml:"noLocalEndpoints"`
	Src                    scenarios.Src
}

type metricsExpect struct {
	Metrics *Metrics `yaml:"iptablesMetrics"`
	Src     scenarios.Src
}

func (e *metricsExpect) Validate(v *scenarios.Validator) {
	m := e.Metrics
	if m == nil {
		return
	}
	for _, c := range []struct {
		key string
		p   *int
	}{{"restoreFailures", m.RestoreFailures}, {"partialRestoreFailures", m.PartialRestoreFailures}, {"fullSyncs", m.FullSyncs}, {"partialSyncs", m.PartialSyncs}} {
		if c.p != nil && *c.p < 0 {
			v.Errorf(m.Src.At(c.key), "must not be negative")
		}
	}
	for _, c := range []struct {
		key   string
		m     map[string]int
		allow [2]string
	}{{"rulesTotal", m.RulesTotal, [2]string{"filter", "nat"}}, {"rulesLast", m.RulesLast, [2]string{"filter", "nat"}}, {"noLocalEndpoints", m.NoLocalEndpoints, [2]string{"internal", "external"}}} {
		for _, l := range slices.Sorted(maps.Keys(c.m)) {
			if l != c.allow[0] && l != c.allow[1] {
				v.Errorf(m.Src.At(c.key), "unknown label %q (want %s or %s)", l, c.allow[0], c.allow[1])
			}
			if c.m[l] < 0 {
				v.Errorf(m.Src.At(c.key), "%s must not be negative", l)
			}
		}
	}
}

func (e *metricsExpect) Check(r *replay.Run) {
	m := e.Metrics
	if m == nil {
		return
	}
	d := dataplaneOf(r)
	if d.proxier == nil {
		r.Fail(e.Src.At("iptablesMetrics"), "iptablesMetrics", "a running iptables proxier", "none")
		return
	}
	got := d.proxier.Metrics()
	one := func(key string, want *int, have int) {
		if want != nil && *want != have {
			r.Fail(m.Src.At(key), "iptablesMetrics."+key, fmt.Sprint(*want), fmt.Sprint(have))
		}
	}
	one("restoreFailures", m.RestoreFailures, got.RestoreFailures)
	one("partialRestoreFailures", m.PartialRestoreFailures, got.PartialRestoreFailures)
	one("fullSyncs", m.FullSyncs, got.FullSyncs)
	one("partialSyncs", m.PartialSyncs, got.PartialSyncs)
	labelled := func(key string, want, have map[string]int) {
		for _, l := range slices.Sorted(maps.Keys(want)) {
			if want[l] != have[l] {
				r.Fail(m.Src.At(key), "iptablesMetrics."+key+"."+l, fmt.Sprint(want[l]), fmt.Sprint(have[l]))
			}
		}
	}
	labelled("rulesTotal", m.RulesTotal, got.RulesTotal)
	labelled("rulesLast", m.RulesLast, got.RulesLast)
	labelled("noLocalEndpoints", m.NoLocalEndpoints, got.NoLocalEndpoints)
}
