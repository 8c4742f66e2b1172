package scenarios

import (
	"fmt"
	"maps"
	"math"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/proxysim/proxysim/sim/clustergen"
	"github.com/proxysim/proxysim/sim/runner"
)

// Pool is one pool of cluster.pools: Count nodes in a zone, with labels,
// each running kube-proxy with the scenario's proxy settings and the
// pool's overrides, and each node's own variation drawn from ranges.
type Pool struct {
	Name   string            `yaml:"name"`
	Count  *int              `yaml:"count"`
	Zone   string            `yaml:"zone"`
	Labels map[string]string `yaml:"labels"`
	Proxy  *PoolProxy        `yaml:"proxy"`
	// CPUSpeed is each node's CPU speed factor, drawn uniformly in
	// [min, max] (default 100%): a sync's cost is divided by it.
	CPUSpeed *PercentRange `yaml:"cpuSpeed"`
	// SyncJitter adds to each runner run of each node a uniform extra in
	// [0, SyncJitter).
	SyncJitter *Duration `yaml:"syncJitter"`
	// WatchDelay is each node's delay from an API write to its informers,
	// drawn uniformly in [min, max] (default 0).
	WatchDelay *DurationRange `yaml:"watchDelay"`
	// Materialize gives every node of the pool a whole proxier and
	// dataplane (Go callers can read them). The first node has them when
	// anything looks at its dataplane (docs/cluster.md, "The first node").
	Materialize bool `yaml:"materialize"`
	Src         Src
}

// PoolProxy are the proxy settings a pool may override.
type PoolProxy struct {
	Mode          string    `yaml:"mode"`
	Version       string    `yaml:"version"`
	MinSyncPeriod *Duration `yaml:"minSyncPeriod"`
	SyncPeriod    *Duration `yaml:"syncPeriod"`
	RetryInterval *Duration `yaml:"retryInterval"`
	SyncCost      *SyncCost `yaml:"syncCost"`
	BurstRuns     *int      `yaml:"burstRuns"`
	Src           Src
}

// PercentRange is {min: 80%, max: 120%}; DurationRange {min: 0s, max: 1s}.
type PercentRange struct {
	Min Percent `yaml:"min"`
	Max Percent `yaml:"max"`
	Src Src
}

type DurationRange struct {
	Min Duration `yaml:"min"`
	Max Duration `yaml:"max"`
	Src Src
}

// Percent is a percentage written 80% or 112.5%, kept as a fraction.
type Percent float64

func (p *Percent) decodeNode(n *yaml.Node) error {
	sm := percentRE.FindStringSubmatch(n.Value)
	if n.Kind != yaml.ScalarNode || sm == nil {
		return fmt.Errorf("want a percentage such as 80%% or 112.5%%, got %q", n.Value)
	}
	whole, _ := strconv.Atoi(sm[1])
	frac, _ := strconv.Atoi((sm[2] + "00")[:2])
	if whole > 10000 {
		return fmt.Errorf("want at most 10000%%, got %s", n.Value)
	}
	*p = Percent(float64(whole*100+frac) / 10000)
	return nil
}

// ClusterNode is one node of a cluster of pools: its kube-proxy is the
// scenario's proxy with its pool's overrides, its name and zone, and its
// own variation (in Proxy.SyncCost).
type ClusterNode struct {
	Name        string
	Pool        string
	Index       int
	Proxy       Proxy
	Labels      map[string]string
	WatchDelay  time.Duration
	Materialize bool
}

// Nodes lists the nodes of cluster.pools, the first being the scenario's
// own proxy (Proxy); nil for a scenario without pools.
func (s *Scenario) Nodes() []ClusterNode { return s.nodes }

// NodeScenario is the scenario as replayed for one node of its pools
// alone: that node's proxy is the scenario's proxy and there are no other
// nodes. A node's syncs and samples in the cluster are exactly those of
// this scenario's replay.
func (s *Scenario) NodeScenario(name string) (*Scenario, error) {
	for _, n := range s.nodes {
		if n.Name == name {
			c := *s
			c.Proxy = n.Proxy
			c.nodes = nil
			if s.Cluster != nil {
				cl := *s.Cluster
				cl.Pools = nil
				c.Cluster = &cl
			}
			return &c, nil
		}
	}
	return nil, fmt.Errorf("%s: no node %q in cluster.pools", s.File, name)
}

// Uniform is a seeded draw in [0, 1) for node i's variation of one kind.
func Uniform(seed uint64, i, kind int) float64 {
	return float64(mix64(seed^mix64(uint64(i)*8+uint64(kind)))>>11) / (1 << 53)
}

func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// maxClusterNodes bounds cluster.pools' total.
const maxClusterNodes = 100_000

// validatePools checks cluster.pools and works out every node; the first
// node's settings become the scenario's proxy.
func (d *decoder) validatePools(s *Scenario) {
	c := s.Cluster
	if c == nil || c.Pools == nil {
		return
	}
	if len(c.Pools) == 0 {
		d.addAt(c.Src.At("pools"), "want at least one pool (or leave pools out for one node)")
		return
	}
	for _, key := range []string{"nodeName", "zone"} {
		if _, ok := s.Proxy.Src.Keys[key]; ok {
			d.addAt(s.Proxy.Src.At(key), "cluster.pools name the nodes and their zones: leave proxy.%s out", key)
		}
	}
	var seed uint64
	if c.Seed != nil {
		if *c.Seed < 0 {
			d.addAt(c.Src.At("seed"), "must not be negative, got %d", *c.Seed)
		}
		seed = uint64(*c.Seed)
	}
	names := map[string]bool{}
	total := 0
	var nodes []ClusterNode
	ok := true
	for i := range c.Pools {
		pl := &c.Pools[i]
		bad := len(d.problems)
		switch {
		case pl.Name == "":
			d.addAt(pl.Src.At("name"), "required: the pool's name")
		case names[pl.Name]:
			d.addAt(pl.Src.At("name"), "pool %q given twice", pl.Name)
		default:
			for _, m := range validation.IsDNS1123Label(pl.Name) {
				d.addAt(pl.Src.At("name"), "%s", m)
			}
		}
		names[pl.Name] = true
		count := 0
		if pl.Count == nil {
			d.addAt(pl.Src.At("count"), "required: how many nodes the pool has")
		} else if count = *pl.Count; count < 1 || total+count > maxClusterNodes {
			d.addAt(pl.Src.At("count"), "want 1 to %d nodes in all, got %d", maxClusterNodes, total+count)
			count = 0
		}
		for k, v := range pl.Labels {
			for _, m := range validation.IsQualifiedName(k) {
				d.addAt(pl.Src.At("labels"), "label %q: %s", k, m)
			}
			for _, m := range validation.IsValidLabelValue(v) {
				d.addAt(pl.Src.At("labels"), "label %s=%q: %s", k, v, m)
			}
		}
		proxy := s.Proxy
		proxy.SyncCost.Runs = append([]Duration(nil), proxy.SyncCost.Runs...)
		if o := pl.Proxy; o != nil {
			if o.Mode != "" {
				m, found := LookupMode(o.Mode)
				switch {
				case !found:
					d.addAt(o.Src.At("mode"), "unknown mode %q (want %s)", o.Mode, orList(ModeNames()))
				case i == 0 && m.Name() != s.Proxy.Mode:
					d.addAt(o.Src.At("mode"), "the first pool's first node is the scenario's proxy: it runs proxy.mode (%s); put the pool of another mode after it", s.Proxy.Mode)
				case pl.Materialize && m.Name() != s.Proxy.Mode:
					d.addAt(pl.Src.At("materialize"), "only nodes of the scenario's mode (%s) can be materialised yet", s.Proxy.Mode)
				default:
					proxy.Mode = m.Name()
				}
			}
			if o.Version != "" {
				proxy.Version = o.Version
				if _, err := runner.GenerationFor(o.Version); err != nil {
					d.addAt(o.Src.At("version"), "%v", err)
				}
			}
			for _, f := range []struct {
				v   *Duration
				out **Duration
			}{{o.MinSyncPeriod, &proxy.MinSyncPeriod}, {o.SyncPeriod, &proxy.SyncPeriod}, {o.RetryInterval, &proxy.RetryInterval}} {
				if f.v != nil {
					*f.out = f.v
				}
			}
			if o.SyncPeriod != nil && o.SyncPeriod.D() == 0 {
				d.addAt(o.Src.At("syncPeriod"), "must be positive")
			}
			if proxy.MinSyncPeriod != nil && proxy.SyncPeriod != nil && proxy.SyncPeriod.D() < proxy.MinSyncPeriod.D() {
				d.addAt(pl.Src.At("proxy"), "syncPeriod %v is shorter than minSyncPeriod %v", proxy.SyncPeriod, proxy.MinSyncPeriod)
			}
			if o.SyncCost != nil {
				proxy.SyncCost = *o.SyncCost
			}
			if o.BurstRuns != nil {
				proxy.BurstRuns = o.BurstRuns
				if *o.BurstRuns < 1 {
					d.addAt(o.Src.At("burstRuns"), "want at least 1 run in a burst, got %d", *o.BurstRuns)
				}
			}
		}
		speedMin, speedMax := 1.0, 1.0
		if r := pl.CPUSpeed; r != nil {
			speedMin, speedMax = float64(r.Min), float64(r.Max)
			if speedMin <= 0 {
				d.addAt(r.Src.At("min"), "want a speed above 0%%")
			}
			if speedMax < speedMin {
				d.addAt(r.Src.At("max"), "max is below min")
			}
		}
		var delayMin, delayMax time.Duration
		if r := pl.WatchDelay; r != nil {
			delayMin, delayMax = r.Min.D(), r.Max.D()
			if delayMax < delayMin {
				d.addAt(r.Src.At("max"), "max is below min")
			}
		}
		var jitter Duration
		if pl.SyncJitter != nil {
			jitter = *pl.SyncJitter
		}
		if i == 0 && delayMin > 0 {
			d.addAt(pl.WatchDelay.Src.At("min"), "the first pool's first node is the scenario's proxy, which hears writes at once: start the range at 0s")
		}
		if len(d.problems) > bad {
			ok = false
			continue
		}
		for j := range count {
			idx := total + j
			np := proxy
			np.NodeName = clustergen.NodeName(idx)
			np.Zone = pl.Zone
			np.SyncCost.Speed = speedMin + (speedMax-speedMin)*Uniform(seed, idx, 0)
			np.SyncCost.Jitter = jitter
			np.SyncCost.JitterSeed = mix64(seed ^ mix64(uint64(idx)*8+1))
			delay := delayMin + time.Duration(math.Floor(float64(delayMax-delayMin)*Uniform(seed, idx, 2)))
			if idx == 0 {
				delay = 0
			}
			nodes = append(nodes, ClusterNode{Name: np.NodeName, Pool: pl.Name, Index: idx, Proxy: np,
				Labels: maps.Clone(pl.Labels), WatchDelay: delay, Materialize: pl.Materialize})
		}
		total += count
	}
	if !ok {
		return
	}
	s.nodes = nodes
	s.Proxy = nodes[0].Proxy
}

// NodeZones and NodeLabels are the generator's per-node zones and labels.
func (s *Scenario) nodeZones() (zones []string, labels []map[string]string) {
	for _, n := range s.nodes {
		zones = append(zones, n.Proxy.Zone)
		labels = append(labels, n.Labels)
	}
	return zones, labels
}
