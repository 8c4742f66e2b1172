package scenarios

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	v1 "k8s.io/api/core/v1"

	"github.com/proxysim/proxysim/sim/clustergen"
)

// Cluster is a cluster the scenario describes rather than lists: its
// objects are made at load and come before those of objects.
type Cluster struct {
	Generate *GeneratedCluster `yaml:"generate"`
	// Churn generates the timeline's API churn (churn_gen.go).
	Churn *ChurnSpec `yaml:"churn"`
	// Pools are the cluster's nodes, each running kube-proxy (see
	// pools.go); Seed draws each node's variation.
	Pools []Pool `yaml:"pools"`
	Seed  *int64 `yaml:"seed"`
	Src   Src
}

// GeneratedCluster is cluster.generate: sim/clustergen's Spec written as
// YAML, each mix in percentages that add up to 100%. The format is in
// docs/scenario-format.md, "cluster".
type GeneratedCluster struct {
	Seed      *int64 `yaml:"seed"`
	Namespace string `yaml:"namespace"`
	Services  *int   `yaml:"services"`
	// Deployments (replicas: how many per namespace), Namespaces and
	// WithService make ClusterLoader2's load-test shape instead of
	// Services (sim/clustergen/deployments.go).
	Deployments           *replicaCounts `yaml:"deployments"`
	Namespaces            *int           `yaml:"namespaces"`
	WithService           *percent       `yaml:"withService"`
	EndpointsPerService   *countMix      `yaml:"endpointsPerService"`
	Ports                 *countMix      `yaml:"ports"`
	Protocols             *shareMix      `yaml:"protocols"`
	Types                 *shareMix      `yaml:"types"`
	ExternalTrafficPolicy *shareMix      `yaml:"externalTrafficPolicy"`
	InternalTrafficPolicy *shareMix      `yaml:"internalTrafficPolicy"`
	SessionAffinity       *shareMix      `yaml:"sessionAffinity"`
	Conditions            *shareMix      `yaml:"conditions"`
	Nodes                 *int           `yaml:"nodes"`
	Zones                 int            `yaml:"zones"`
	ServiceCIDR           string         `yaml:"serviceCIDR"`
	PodCIDR               string         `yaml:"podCIDR"`
	NodeCIDR              string         `yaml:"nodeCIDR"`
	LoadBalancerCIDR      string         `yaml:"loadBalancerCIDR"`
	NodePortRange         string         `yaml:"nodePortRange"`
	MaxEndpointsPerSlice  *int           `yaml:"maxEndpointsPerSlice"`
	Pods                  bool           `yaml:"pods"`
	Src                   Src
}

// mixEntry is one value of a mix and its share, in hundredths of a
// percent, where the file wrote it.
type mixEntry struct {
	key   string
	count int // the key as a number, in a countMix
	share int
	at    Pos
}

// shareMix is a mapping of values to percentages: {TCP: 90%, UDP: 10%}.
type shareMix struct {
	entries []mixEntry
	at      Pos
	numeric bool // a countMix's
}

// countMix is a whole number (every object has that many) or a mapping of
// numbers to percentages: {1: 50%, 2: 30%, 10: 20%}.
type countMix struct{ shareMix }

// replicaCounts maps a replica count to how many Deployments of that
// size each namespace has: {5: 300, 30: 25, 250: 3}.
type replicaCounts struct{ shareMix }

func (r *replicaCounts) decodeParts(d *decoder, n *yaml.Node, path string) {
	r.at, r.numeric = Pos{Line: n.Line, Column: n.Column, Path: path}, true
	if n.Kind != yaml.MappingNode {
		d.add(n, path, "want a mapping of replicas to how many Deployments of that size each namespace has ({5: 300, 30: 25, 250: 3}), got a %s", kindName(n))
		return
	}
	seen := map[int]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		p := join(path, k.Value)
		r2, err := strconv.Atoi(k.Value)
		if k.Tag != "!!int" || err != nil || r2 < 0 {
			d.add(k, p, "want replicas as a whole number, not negative, got %q", k.Value)
			continue
		}
		if seen[r2] {
			d.add(k, p, "%q given twice", k.Value)
			continue
		}
		seen[r2] = true
		c, err := strconv.Atoi(v.Value)
		if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || err != nil || c < 0 {
			d.add(v, p, "want how many Deployments of %d replicas each namespace has, a whole number not negative, got %q", r2, v.Value)
			continue
		}
		r.entries = append(r.entries, mixEntry{key: k.Value, count: r2, share: c, at: Pos{Line: k.Line, Column: k.Column, Path: p}})
	}
}

// percent is one percentage, kept in hundredths: 50% is 5000.
type percent struct {
	hundredths int
}

func (p *percent) decodeNode(n *yaml.Node) error {
	sm := percentRE.FindStringSubmatch(n.Value)
	if n.Kind != yaml.ScalarNode || sm == nil {
		return fmt.Errorf("want a percentage such as 50%% or 12.5%%, got %q", n.Value)
	}
	whole, _ := strconv.Atoi(sm[1])
	frac, _ := strconv.Atoi((sm[2] + "00")[:2])
	if whole > 100 || whole == 100 && frac > 0 {
		return fmt.Errorf("want at most 100%%, got %s", n.Value)
	}
	p.hundredths = whole*100 + frac
	return nil
}

// percentRE is a percentage with at most two decimals.
var percentRE = regexp.MustCompile(`^([0-9]+)(?:\.([0-9]{1,2}))?%$`)

// hundredths is 100% in the unit shares are kept in.
const hundredths = 100_00

func (m *shareMix) decodeParts(d *decoder, n *yaml.Node, path string) {
	m.decodeShares(d, n, path, false)
}

func (m *countMix) decodeParts(d *decoder, n *yaml.Node, path string) {
	if n.Kind == yaml.ScalarNode {
		m.at = Pos{Line: n.Line, Column: n.Column, Path: path}
		c, err := strconv.Atoi(n.Value)
		if n.Tag != "!!int" || err != nil {
			d.add(n, path, "want a whole number or a mapping of numbers to percentages ({1: 50%%, 10: 50%%}), got %q", n.Value)
			return
		}
		if c < 0 {
			d.add(n, path, "must not be negative, got %d", c)
			return
		}
		m.numeric = true
		m.entries = []mixEntry{{key: n.Value, count: c, share: hundredths, at: m.at}}
		return
	}
	m.decodeShares(d, n, path, true)
}

// decodeShares reads the mapping form; numeric keys must be whole numbers
// that are not negative.
func (m *shareMix) decodeShares(d *decoder, n *yaml.Node, path string, numeric bool) {
	m.at, m.numeric = Pos{Line: n.Line, Column: n.Column, Path: path}, numeric
	if n.Kind != yaml.MappingNode {
		d.add(n, path, "want a mapping of values to percentages that add up to 100%%, got a %s", kindName(n))
		return
	}
	total, ok := 0, true
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		p := join(path, k.Value)
		e := mixEntry{key: k.Value, at: Pos{Line: k.Line, Column: k.Column, Path: p}}
		id := k.Value // what makes two keys the same value
		if numeric {
			c, err := strconv.Atoi(k.Value)
			switch {
			case k.Tag != "!!int" || err != nil:
				d.add(k, p, "want a whole number, got %q", k.Value)
				ok = false
			case c < 0:
				d.add(k, p, "must not be negative, got %d", c)
				ok = false
			}
			e.count, id = c, strconv.Itoa(c)
		}
		if seen[id] {
			d.add(k, p, "%q given twice", k.Value)
			ok = false
			continue
		}
		seen[id] = true
		sm := percentRE.FindStringSubmatch(v.Value)
		if v.Kind != yaml.ScalarNode || sm == nil {
			d.add(v, p, "want a percentage such as 50%% or 12.5%%, got %q", v.Value)
			ok = false
			continue
		}
		whole, _ := strconv.Atoi(sm[1])
		frac, _ := strconv.Atoi((sm[2] + "00")[:2])
		if whole > 100 {
			d.add(v, p, "want at most 100%%, got %s", v.Value)
			ok = false
			continue
		}
		e.share = whole*100 + frac
		total += e.share
		m.entries = append(m.entries, e)
	}
	if ok && total != hundredths {
		d.add(n, path, "percentages add up to %s, not 100%%", percentText(total))
	}
}

// percentText writes hundredths of a percent as the file would: 90%, 12.5%.
func percentText(h int) string {
	if h%100 == 0 {
		return strconv.Itoa(h/100) + "%"
	}
	return strings.TrimRight(fmt.Sprintf("%d.%02d", h/100, h%100), "0") + "%"
}

// shares converts a mix to clustergen's, K being the value's type.
func shares[K ~string](m *shareMix) clustergen.Mix[K] {
	if m == nil {
		return nil
	}
	out := clustergen.Mix[K]{}
	for _, e := range m.entries {
		out[K(e.key)] = e.share
	}
	return out
}

func counts(m *countMix) clustergen.Mix[int] {
	if m == nil {
		return nil
	}
	out := clustergen.Mix[int]{}
	for _, e := range m.entries {
		out[e.count] = e.share
	}
	return out
}

// spec is the generator's spec, as far as the fields are valid: ok is
// false when one is not (and is reported).
func (g *GeneratedCluster) spec(d *decoder) (sp *clustergen.Spec, ok bool) {
	sp = &clustergen.Spec{
		Namespace: g.Namespace, Zones: g.Zones, Pods: g.Pods,
		ServiceCIDR: g.ServiceCIDR, PodCIDR: g.PodCIDR, NodeCIDR: g.NodeCIDR, LoadBalancerCIDR: g.LoadBalancerCIDR,
		NodePortRange:         g.NodePortRange,
		EndpointsPerService:   counts(g.EndpointsPerService),
		Ports:                 counts(g.Ports),
		Protocols:             shares[v1.Protocol](g.Protocols),
		Types:                 shares[v1.ServiceType](g.Types),
		ExternalTrafficPolicy: shares[v1.ServiceExternalTrafficPolicy](g.ExternalTrafficPolicy),
		InternalTrafficPolicy: shares[v1.ServiceInternalTrafficPolicy](g.InternalTrafficPolicy),
		SessionAffinity:       shares[v1.ServiceAffinity](g.SessionAffinity),
		Conditions:            shares[clustergen.Condition](g.Conditions),
	}
	ok = true
	if g.Seed != nil {
		if *g.Seed < 0 {
			d.addAt(g.Src.At("seed"), "must not be negative, got %d", *g.Seed)
			ok = false
		}
		sp.Seed = uint64(*g.Seed)
	}
	switch {
	case g.Deployments != nil:
		sp.Deployments = map[int]int{}
		for _, e := range g.Deployments.entries {
			sp.Deployments[e.count] = e.share
		}
		if g.Services != nil {
			sp.Services = *g.Services // refused by the generator, at services
		}
		if len(g.Deployments.entries) == 0 && !d.has(g.Deployments.at.Path) {
			d.addAt(g.Src.At("deployments"), "no Deployments: give at least one replica count a number of Deployments")
			ok = false
		}
		if g.WithService == nil {
			d.addAt(g.Src.At("deployments"), "deployments need withService: the share of each size's Deployments with a Service in front (ClusterLoader2's load test: 50%%)")
			ok = false
		} else {
			sp.WithService = g.WithService.hundredths
		}
	case g.Services == nil:
		d.addAt(g.Src.At("services"), "required: how many Services to generate (or deployments: ClusterLoader2's Deployments per namespace)")
		ok = false
	default:
		sp.Services = *g.Services
		for _, key := range []string{"namespaces", "withService"} {
			if _, set := g.Src.Keys[key]; set {
				d.addAt(g.Src.At(key), "%s goes with deployments: give deployments: {REPLICAS: COUNT, ...} or leave %s out", key, key)
				ok = false
			}
		}
	}
	// Zero means the default in the Go spec; in a file it is a mistake.
	for _, c := range []struct {
		key string
		v   *int
		min int
		out *int
	}{{"nodes", g.Nodes, 1, &sp.Nodes}, {"namespaces", g.Namespaces, 1, &sp.Namespaces}, {"maxEndpointsPerSlice", g.MaxEndpointsPerSlice, 1, &sp.MaxEndpointsPerSlice}} {
		if c.v == nil {
			continue
		}
		if *c.v < c.min {
			d.addAt(g.Src.At(c.key), "want at least %d, got %d", c.min, *c.v)
			ok = false
		}
		*c.out = *c.v
	}
	if g.Zones < 0 {
		d.addAt(g.Src.At("zones"), "must not be negative, got %d", g.Zones)
		ok = false
	}
	return sp, ok && !d.has(g.Src.Path)
}

// generatedObjects makes cluster.generate's objects, or reports why not
// at the field to blame.
func (d *decoder) generatedObjects(s *Scenario) []Object {
	if s.Cluster == nil {
		return nil
	}
	g := s.Cluster.Generate
	if g == nil {
		if s.Cluster.Pools == nil {
			d.addAt(s.Cluster.Src.At("generate"), "say how to make the cluster: generate: {services: N, ...} or pools: [...]")
		}
		return nil
	}
	if g.Pods && s.Controllers.On["endpointSlice"] == nil {
		d.addAt(g.Src.At("pods"), "generated Pods need controllers: {endpointSlice: {}} to write their slices")
	} else if g.Deployments != nil && s.Controllers.On["endpointSlice"] == nil {
		d.addAt(g.Src.At("deployments"), "generated Deployments' Pods need controllers: {endpointSlice: {}} to write their slices")
	}
	sp, valid := g.spec(d)
	if len(s.nodes) > 0 {
		// The pools are the generated nodes: node-000, ... in their zones.
		if g.Nodes != nil && *g.Nodes != len(s.nodes) {
			d.addAt(g.Src.At("nodes"), "cluster.pools have %d nodes, not %d (leave nodes out)", len(s.nodes), *g.Nodes)
			valid = false
		}
		if g.Zones != 0 {
			d.addAt(g.Src.At("zones"), "cluster.pools give the zones: leave zones out")
			valid = false
		}
		sp.Nodes = len(s.nodes)
		sp.NodeZones, sp.NodeLabels = s.nodeZones()
	}
	c, err := clustergen.Generate(*sp)
	if errs, ok := err.(clustergen.Errors); ok {
		// Every problem at once, but each field's only once: one the file
		// already got wrong is not the generator's to report again.
		for _, e := range errs {
			key, _, _ := strings.Cut(e.Field, ".")
			if !d.has(join(g.Src.Path, key)) {
				d.addAt(g.at(e.Field), "%s", e.Msg)
			}
		}
		return nil
	} else if err != nil {
		d.addAt(g.Src.At(""), "%v", err)
		return nil
	}
	if !valid {
		return nil
	}
	at := Pos{Line: g.Src.Line, Column: g.Src.Column, Path: g.Src.Path}
	objs := c.Objects()
	out := make([]Object, len(objs))
	for i, o := range objs {
		m := o.(interface {
			GetNamespace() string
			GetName() string
		})
		kind := o.GetObjectKind().GroupVersionKind().Kind
		out[i] = Object{Obj: o, Kind: kind, Key: KeyOf(kind, m.GetNamespace(), m.GetName()), Pos: at, File: d.file}
	}
	return out
}

// at is where a generator's field (services, types.NodePort) was written.
func (g *GeneratedCluster) at(field string) Pos {
	key, value, _ := strings.Cut(field, ".")
	if value != "" {
		var deps *shareMix
		if g.Deployments != nil {
			deps = &g.Deployments.shareMix
		}
		for _, m := range []*shareMix{deps, mixOf(g.EndpointsPerService), mixOf(g.Ports), g.Protocols, g.Types, g.ExternalTrafficPolicy,
			g.InternalTrafficPolicy, g.SessionAffinity, g.Conditions} {
			if m == nil || m.at.Path != join(g.Src.Path, key) {
				continue
			}
			for _, e := range m.entries {
				if e.key == value || (m.numeric && strconv.Itoa(e.count) == value) {
					return e.at
				}
			}
		}
	}
	return g.Src.At(key)
}

func mixOf(c *countMix) *shareMix {
	if c == nil {
		return nil
	}
	return &c.shareMix
}
