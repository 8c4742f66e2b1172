package scenarios

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/proxysim/proxysim/sim/kpmetrics"
)

func init() { RegisterExpectation(func() Expectation { return &MetricsExpectation{} }) }

// MetricsExpectation checks kube-proxy's metrics (sim/kpmetrics) as a scrape at
// this virtual instant would show them:
//
//	metrics:
//	  kubeproxy_sync_proxy_rules_duration_seconds: {count: 4}
//	  'kubeproxy_sync_proxy_rules_iptables_total{table="nat"}': {value: 12}
//	  kubeproxy_network_programming_duration_seconds: {quantile: {q: 0.99, atMost: 2}}
//
// A key is a metric name with optional label matchers (label="value"); the
// series it selects are summed, as PromQL's sum() would. value, atLeast and
// atMost check a counter or gauge; count and sum a histogram's; quantile
// estimates a histogram quantile as PromQL's histogram_quantile does.
type MetricsExpectation struct {
	Metrics map[string]*MetricCheck `yaml:"metrics"`
}

// MetricCheck is what one metrics key expects.
type MetricCheck struct {
	Value    *Number        `yaml:"value"`
	AtLeast  *Number        `yaml:"atLeast"`
	AtMost   *Number        `yaml:"atMost"`
	Count    *int           `yaml:"count"`
	Sum      *Number        `yaml:"sum"`
	Quantile *QuantileCheck `yaml:"quantile"`
	Src      Src
}

// QuantileCheck is a histogram_quantile(q) expectation: exactly value, or
// within [atLeast, atMost].
type QuantileCheck struct {
	Q       *Number `yaml:"q"`
	Value   *Number `yaml:"value"`
	AtLeast *Number `yaml:"atLeast"`
	AtMost  *Number `yaml:"atMost"`
	Src     Src
}

// Number is a YAML int or float.
type Number float64

func (n *Number) decodeNode(y *yaml.Node) error {
	if y.Kind != yaml.ScalarNode || (y.Tag != "!!int" && y.Tag != "!!float") {
		return fmt.Errorf("want a number, got %q", y.Value)
	}
	f, err := strconv.ParseFloat(y.Value, 64)
	if err != nil {
		return fmt.Errorf("want a number, got %q", y.Value)
	}
	*n = Number(f)
	return nil
}

var selectorRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?$`)
var matcherRE = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"]*)"\s*$`)

// ParseSelector splits `name{a="x",b="y"}`.
func ParseSelector(s string) (string, map[string]string, error) {
	m := selectorRE.FindStringSubmatch(s)
	if m == nil {
		return "", nil, fmt.Errorf("want a metric name, optionally with {label=\"value\",...}, got %q", s)
	}
	labels := map[string]string{}
	if strings.TrimSpace(m[2]) != "" {
		for _, part := range strings.Split(m[2], ",") {
			lm := matcherRE.FindStringSubmatch(part)
			if lm == nil {
				return "", nil, fmt.Errorf("want label=\"value\", got %q", strings.TrimSpace(part))
			}
			if _, dup := labels[lm[1]]; dup {
				return "", nil, fmt.Errorf("label %s given twice", lm[1])
			}
			labels[lm[1]] = lm[2]
		}
	}
	return m[1], labels, nil
}

func (e *MetricsExpectation) Keys() []string {
	keys := make([]string, 0, len(e.Metrics))
	for k := range e.Metrics {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (e *MetricsExpectation) Validate(v *Validator) {
	if e.Metrics == nil {
		return
	}
	modeName := v.s.Proxy.Mode
	if m, ok := LookupMode(modeName); ok {
		modeName = m.Name()
	}
	names := kpmetrics.Names(modeName)
	for _, key := range e.Keys() {
		c := e.Metrics[key]
		if c == nil {
			continue
		}
		at := Pos{c.Src.Line, c.Src.Column, c.Src.Path}
		name, labels, err := ParseSelector(key)
		if err != nil {
			v.Errorf(at, "%v", err)
			continue
		}
		if names == nil {
			v.Errorf(at, "mode %q has no kube-proxy metrics", modeName)
			continue
		}
		if !containsString(names, name) {
			v.Errorf(at, "unknown metric %s for mode %s (known: %s)", name, modeName, strings.Join(names, ", "))
			continue
		}
		kind, _ := kpmetrics.KindOf(name)
		for _, l := range sortedKeys(labels) {
			if !containsString(kind.Labels, l) {
				v.Errorf(at, "%s has no label %s (labels: %s)", name, l, strings.Join(kind.Labels, ", "))
			}
		}
		scalar := c.Value != nil || c.AtLeast != nil || c.AtMost != nil
		hist := c.Count != nil || c.Sum != nil || c.Quantile != nil
		switch {
		case !scalar && !hist:
			v.Errorf(at, "say what to expect: value, atLeast or atMost (counter, gauge); count, sum or quantile (histogram)")
		case kind.Histogram && scalar:
			v.Errorf(at, "%s is a histogram: check count, sum or quantile", name)
		case !kind.Histogram && hist:
			v.Errorf(at, "%s is not a histogram: check value, atLeast or atMost", name)
		}
		if c.Count != nil && *c.Count < 0 {
			v.Errorf(c.Src.At("count"), "a count cannot be negative")
		}
		if q := c.Quantile; q != nil {
			switch {
			case q.Q == nil:
				v.Errorf(Pos{q.Src.Line, q.Src.Column, q.Src.Path}, "say which quantile: q, between 0 and 1")
			case *q.Q < 0 || *q.Q > 1:
				v.Errorf(q.Src.At("q"), "q must be between 0 and 1")
			}
			if q.Value == nil && q.AtLeast == nil && q.AtMost == nil {
				v.Errorf(Pos{q.Src.Line, q.Src.Column, q.Src.Path}, "say what to expect: value, atLeast or atMost")
			}
		}
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
