package scenarios

// NodeStep acts on one node of cluster.pools: `node: {name: node-001,
// restart: true}` or `node: {name: node-001, failSyncs: 2}`.
type NodeStep struct {
	Node *NodeAction `yaml:"node"`
}

// NodeAction is what a node step does.
type NodeAction struct {
	Name      string `yaml:"name"`
	Restart   bool   `yaml:"restart"`
	FailSyncs *int   `yaml:"failSyncs"`
	Src       Src
}

func (n *NodeStep) Validate(v *Validator) {
	a := n.Node
	if a == nil {
		return
	}
	found := false
	for _, cn := range v.s.nodes {
		found = found || cn.Name == a.Name
	}
	if !found {
		v.Errorf(a.Src.At("name"), "no node %q in cluster.pools", a.Name)
	}
	if a.Restart == (a.FailSyncs != nil) {
		v.Errorf(Pos{a.Src.Line, a.Src.Column, a.Src.Path}, "say one thing to do: restart: true or failSyncs: N")
	}
	if a.FailSyncs != nil && *a.FailSyncs < 1 {
		v.Errorf(a.Src.At("failSyncs"), "want at least 1 failing sync, got %d", *a.FailSyncs)
	}
}

// ClusterExpectation bounds the cluster's figures so far:
//
//	cluster:
//	  programmingLatency: {p50: {max: 5s}, p90: ..., p99: {max: 30s}}   # the SLI as CL2 computes it
//	  exactLatency: {p99: {max: 30s}}      # the exact quantiles of the same samples
//	  podLatency: {p99: {max: 30s}}        # the true pod latency over every node
//	  syncs: {atLeast: 1, atMost: 100}     # every node's sync count
type ClusterExpectation struct {
	Cluster *ClusterExpect `yaml:"cluster"`
}

// ClusterExpect is the cluster expectation.
type ClusterExpect struct {
	ProgrammingLatency *QuantileBounds `yaml:"programmingLatency"`
	ExactLatency       *QuantileBounds `yaml:"exactLatency"`
	PodLatency         *QuantileBounds `yaml:"podLatency"`
	Syncs              *NodeCount      `yaml:"syncs"`
	Src                Src
}

// QuantileBounds bounds p50, p90 and p99.
type QuantileBounds struct {
	P50 *Bound `yaml:"p50"`
	P90 *Bound `yaml:"p90"`
	P99 *Bound `yaml:"p99"`
	Src Src
}

// Bound is {max: 30s} or {min: 1s} or both.
type Bound struct {
	Min *Duration `yaml:"min"`
	Max *Duration `yaml:"max"`
	Src Src
}

// NodeCount bounds a count of every node.
type NodeCount struct {
	AtLeast *int `yaml:"atLeast"`
	AtMost  *int `yaml:"atMost"`
	Src     Src
}

func init() {
	RegisterAction(func() Action { return &NodeStep{} })
	RegisterExpectation(func() Expectation { return &ClusterExpectation{} })
}

func (e *ClusterExpectation) Validate(v *Validator) {
	c := e.Cluster
	if c == nil {
		return
	}
	if len(v.s.nodes) == 0 {
		v.Errorf(Pos{c.Src.Line, c.Src.Column, c.Src.Path}, "a cluster expectation needs cluster.pools")
	}
	if c.ProgrammingLatency == nil && c.ExactLatency == nil && c.PodLatency == nil && c.Syncs == nil {
		v.Errorf(Pos{c.Src.Line, c.Src.Column, c.Src.Path}, "say what to expect: programmingLatency, exactLatency, podLatency or syncs")
	}
	for _, q := range []*QuantileBounds{c.ProgrammingLatency, c.ExactLatency, c.PodLatency} {
		if q == nil {
			continue
		}
		if q.P50 == nil && q.P90 == nil && q.P99 == nil {
			v.Errorf(Pos{q.Src.Line, q.Src.Column, q.Src.Path}, "say which quantile: p50, p90 or p99")
		}
		for _, b := range []*Bound{q.P50, q.P90, q.P99} {
			if b == nil {
				continue
			}
			if b.Min == nil && b.Max == nil {
				v.Errorf(Pos{b.Src.Line, b.Src.Column, b.Src.Path}, "say min, max or both")
			}
			if b.Min != nil && b.Max != nil && *b.Max < *b.Min {
				v.Errorf(b.Src.At("max"), "max is below min")
			}
		}
	}
	if s := c.Syncs; s != nil {
		if s.AtLeast == nil && s.AtMost == nil {
			v.Errorf(Pos{s.Src.Line, s.Src.Column, s.Src.Path}, "say atLeast, atMost or both")
		}
		if s.AtLeast != nil && s.AtMost != nil && *s.AtMost < *s.AtLeast {
			v.Errorf(s.Src.At("atMost"), "atMost is below atLeast")
		}
	}
}
