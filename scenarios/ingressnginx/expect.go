package ingressnginx

import (
	"fmt"
	"math"
	"net"
	"slices"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
)

// reloadsExpect: the reloads so far (failed ones included), by the instant
// each began.
type reloadsExpect struct {
	Reloads *scenarios.SyncExpect `yaml:"reloads"`
}

func (e *reloadsExpect) Validate(v *scenarios.Validator) {
	if e.Reloads == nil {
		return
	}
	needs(v, scenarios.Pos{Line: e.Reloads.Src.Line, Column: e.Reloads.Src.Column, Path: e.Reloads.Src.Path})
	v.ValidateInstants(e.Reloads)
}

func (e *reloadsExpect) Check(r *replay.Run) {
	if e.Reloads != nil {
		r.CheckInstants("reloads", e.Reloads, of(r).Reloads())
	}
}

// dynamicExpect: the backend posts that succeeded, by instant.
type dynamicExpect struct {
	DynamicUpdates *scenarios.SyncExpect `yaml:"dynamicUpdates"`
}

func (e *dynamicExpect) Validate(v *scenarios.Validator) {
	if e.DynamicUpdates == nil {
		return
	}
	needs(v, scenarios.Pos{Line: e.DynamicUpdates.Src.Line, Column: e.DynamicUpdates.Src.Column, Path: e.DynamicUpdates.Src.Path})
	v.ValidateInstants(e.DynamicUpdates)
}

func (e *dynamicExpect) Check(r *replay.Run) {
	if e.DynamicUpdates != nil {
		r.CheckInstants("dynamicUpdates", e.DynamicUpdates, of(r).DynamicUpdates())
	}
}

// backendsExpect: where the Lua balancer sends each host/path now. The
// mapping is read as a node, so that each entry is reported at its line.
type backendsExpect struct {
	IngressBackends *yaml.Node `yaml:"ingressBackends"`
	Src             scenarios.Src
	entries         []backendEntry
}

type backendEntry struct {
	key       string
	endpoints []string
	pos       scenarios.Pos
}

// hostPath splits "host/path" at its first slash ("_" is the catch-all
// server).
func hostPath(k string) (string, string, bool) {
	i := strings.IndexByte(k, '/')
	if i <= 0 {
		return "", "", false
	}
	return k[:i], k[i:], true
}

func (e *backendsExpect) Validate(v *scenarios.Validator) {
	n := e.IngressBackends
	if n == nil {
		return
	}
	at := e.Src.At("ingressBackends")
	needs(v, at)
	if n.Kind != yaml.MappingNode {
		v.Errorf(at, "want a mapping of host/path to a list of ip:port endpoints")
		return
	}
	e.entries = nil
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		p := scenarios.Pos{Line: k.Line, Column: k.Column, Path: at.Path + "." + k.Value}
		if _, _, ok := hostPath(k.Value); !ok {
			v.Errorf(p, "want host/path, such as web.example/ or _/api, got %q", k.Value)
		}
		if val.Kind != yaml.SequenceNode {
			v.Errorf(p, "want a list of ip:port endpoints ([] for none)")
			continue
		}
		ent := backendEntry{key: k.Value, pos: p}
		for _, ep := range val.Content {
			if host, port, err := net.SplitHostPort(ep.Value); ep.Kind != yaml.ScalarNode || err != nil || net.ParseIP(host) == nil || port == "" {
				v.Errorf(scenarios.Pos{Line: ep.Line, Column: ep.Column, Path: p.Path}, "want ip:port endpoints, got %q", ep.Value)
			}
			ent.endpoints = append(ent.endpoints, ep.Value)
		}
		sort.Strings(ent.endpoints)
		e.entries = append(e.entries, ent)
	}
}

func (e *backendsExpect) Check(r *replay.Run) {
	if e.IngressBackends == nil {
		return
	}
	c := of(r)
	for _, ent := range e.entries {
		host, path, _ := hostPath(ent.key)
		want := slices.Clone(ent.endpoints)
		if want == nil {
			want = []string{}
		}
		got, served := c.Routes(host, path)
		switch {
		case !served:
			r.Fail(ent.pos, "ingressBackends", fmt.Sprintf("%s served by %v", ent.key, want), "no such location in nginx's configuration")
		case !slices.Equal(got, ent.endpoints):
			r.Fail(ent.pos, "ingressBackends", fmt.Sprint(want), fmt.Sprint(got))
		}
	}
}

// latencyExpect bounds the time until the Lua balancer routes by a
// change: from an EndpointSlice change (of one slice's latest change, or
// of every change measured so far), or from a pod's Ready transition (one
// pod, or several as a distribution).
type latencyExpect struct {
	IngressLatency *struct {
		Object  string              `yaml:"object"`
		Pod     string              `yaml:"pod"`
		Pods    []string            `yaml:"pods"`
		Max     *scenarios.Duration `yaml:"max"`
		Exact   *scenarios.Duration `yaml:"exact"`
		P50     *scenarios.Duration `yaml:"p50"`
		P99     *scenarios.Duration `yaml:"p99"`
		Samples *int                `yaml:"samples"`
		Src     scenarios.Src
	} `yaml:"ingressLatency"`
}

func (e *latencyExpect) Validate(v *scenarios.Validator) {
	l := e.IngressLatency
	if l == nil {
		return
	}
	here := scenarios.Pos{Line: l.Src.Line, Column: l.Src.Column, Path: l.Src.Path}
	needs(v, here)
	forms := 0
	for _, given := range []bool{l.Object != "", l.Pod != "", l.Pods != nil} {
		if given {
			forms++
		}
	}
	if forms > 1 {
		v.Errorf(here, "give one of object, pod and pods")
	}
	if l.Object != "" {
		if !strings.HasPrefix(l.Object, "EndpointSlice ") {
			v.Errorf(l.Src.At("object"), "want an EndpointSlice (\"EndpointSlice namespace/name\"), got %q", l.Object)
		} else if !v.Exists(l.Object) {
			v.Errorf(l.Src.At("object"), "no object %q at this point", l.Object)
		}
	}
	if l.Pod != "" {
		if _, err := scenarios.PodKey(l.Pod); err != nil {
			v.Errorf(l.Src.At("pod"), "%v", err)
		}
	}
	if l.Pods != nil && len(l.Pods) == 0 {
		v.Errorf(l.Src.At("pods"), "name at least one pod")
	}
	for _, p := range l.Pods {
		if _, err := scenarios.PodKey(p); err != nil {
			v.Errorf(l.Src.At("pods"), "%v", err)
		}
	}
	one := l.Object != "" || l.Pod != ""
	if one && l.Samples != nil {
		v.Errorf(l.Src.At("samples"), "samples counts every change: not with object or pod")
	}
	if one && (l.P50 != nil || l.P99 != nil) {
		v.Errorf(here, "p50 and p99 are over several latencies: not with object or pod")
	}
	if l.Max == nil && l.Exact == nil && l.Samples == nil && l.P50 == nil && l.P99 == nil {
		v.Errorf(here, "say max, exact, p50, p99 or samples")
	}
	if l.Samples != nil && *l.Samples < 0 {
		v.Errorf(l.Src.At("samples"), "must not be negative, got %d", *l.Samples)
	}
}

// percentile is the nearest-rank percentile of sorted latencies: the
// smallest such that at least q of them are at most it.
func percentile(sorted []time.Duration, q float64) time.Duration {
	n := int(math.Ceil(q * float64(len(sorted))))
	return sorted[max(n, 1)-1]
}

func (e *latencyExpect) Check(r *replay.Run) {
	l := e.IngressLatency
	if l == nil {
		return
	}
	c := of(r)
	var got []time.Duration
	switch {
	case l.Object != "":
		d, ok := c.Latency(strings.TrimPrefix(l.Object, "EndpointSlice "))
		if !ok {
			r.Fail(l.Src.At("object"), "ingressLatency", "the ingress routing by the latest change of "+l.Object, "not yet")
			return
		}
		got = []time.Duration{d}
	case l.Pod != "" || l.Pods != nil:
		pods, where := l.Pods, "pods"
		if l.Pod != "" {
			pods, where = []string{l.Pod}, "pod"
		}
		for _, p := range pods {
			k, _ := scenarios.PodKey(p)
			d, ok := c.PodLatency(k)
			if !ok {
				r.Fail(l.Src.At(where), "ingressLatency", "the ingress routing to Pod "+k+" since it turned Ready", "not yet")
				return
			}
			got = append(got, d)
		}
	default:
		for _, s := range c.Samples() {
			got = append(got, s.Latency())
		}
	}
	if l.Samples != nil && len(got) != *l.Samples {
		r.Fail(l.Src.At("samples"), "ingressLatency", fmt.Sprint(*l.Samples), fmt.Sprintf("%d %v", len(got), got))
	}
	for _, d := range got {
		if l.Exact != nil && d != l.Exact.D() {
			r.Fail(l.Src.At("exact"), "ingressLatency", l.Exact.String(), fmt.Sprint(got))
			break
		}
		if l.Max != nil && d > l.Max.D() {
			r.Fail(l.Src.At("max"), "ingressLatency", "at most "+l.Max.String(), fmt.Sprint(got))
			break
		}
	}
	sorted := slices.Clone(got)
	slices.Sort(sorted)
	for _, p := range []struct {
		key  string
		q    float64
		want *scenarios.Duration
	}{{"p50", 0.5, l.P50}, {"p99", 0.99, l.P99}} {
		if p.want == nil {
			continue
		}
		if len(sorted) == 0 {
			r.Fail(l.Src.At(p.key), "ingressLatency", p.want.String(), "no latency measured yet")
			continue
		}
		if v := percentile(sorted, p.q); v != p.want.D() {
			r.Fail(l.Src.At(p.key), "ingressLatency", p.want.String(), fmt.Sprintf("%v of %v", v, sorted))
		}
	}
}

// metricsExpect: the controller's metrics, exactly.
type metricsExpect struct {
	IngressMetrics *struct {
		Reloads              *int  `yaml:"reloads"`
		ReloadErrors         *int  `yaml:"reloadErrors"`
		LastReloadSuccessful *bool `yaml:"lastReloadSuccessful"`
		DynamicUpdates       *int  `yaml:"dynamicUpdates"`
		DynamicErrors        *int  `yaml:"dynamicErrors"`
		Syncs                *int  `yaml:"syncs"`
		Skipped              *int  `yaml:"skipped"`
		RingDropped          *int  `yaml:"ringDropped"`
		Src                  scenarios.Src
	} `yaml:"ingressMetrics"`
}

func (e *metricsExpect) Validate(v *scenarios.Validator) {
	if m := e.IngressMetrics; m != nil {
		needs(v, scenarios.Pos{Line: m.Src.Line, Column: m.Src.Column, Path: m.Src.Path})
	}
}

func (e *metricsExpect) Check(r *replay.Run) {
	m := e.IngressMetrics
	if m == nil {
		return
	}
	got := of(r).Metrics()
	for _, f := range []struct {
		key  string
		want *int
		got  int
	}{
		{"reloads", m.Reloads, got.Reloads}, {"reloadErrors", m.ReloadErrors, got.ReloadErrors},
		{"dynamicUpdates", m.DynamicUpdates, got.DynamicUpdates}, {"dynamicErrors", m.DynamicErrors, got.DynamicErrors},
		{"syncs", m.Syncs, got.Syncs}, {"skipped", m.Skipped, got.Skipped}, {"ringDropped", m.RingDropped, got.RingDropped},
	} {
		if f.want != nil && *f.want != f.got {
			r.Fail(m.Src.At(f.key), "ingressMetrics."+f.key, fmt.Sprint(*f.want), fmt.Sprint(f.got))
		}
	}
	if m.LastReloadSuccessful != nil && *m.LastReloadSuccessful != got.LastReloadSuccessful {
		r.Fail(m.Src.At("lastReloadSuccessful"), "ingressMetrics.lastReloadSuccessful", fmt.Sprint(*m.LastReloadSuccessful), fmt.Sprint(got.LastReloadSuccessful))
	}
}
