package scenarios

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/proxysim/proxysim/sim"
	"github.com/proxysim/proxysim/sim/costprofile"
	"github.com/proxysim/proxysim/sim/runner"
)

// decodeParts reads a sync cost written as the model's mapping
// (`{fixed, perService, perEndpoint}`), as one duration (the fixed cost),
// or as a list of durations, each runner run's cost in order, the last one
// repeating (`[50ms, 4s, 50ms]`).
func (c *SyncCost) decodeParts(d *decoder, n *yaml.Node, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode {
		if err := c.Fixed.decodeNode(n); err != nil {
			d.add(n, path, "%v", err)
		}
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.decodeMapping(n, path, []reflect.Value{reflect.ValueOf(c).Elem()}, false)
		c.loadProfile(d, n, path)
		return
	}
	if len(n.Content) == 0 {
		d.add(n, path, "want at least one duration (or leave syncCost out)")
		return
	}
	c.Runs = make([]Duration, len(n.Content))
	for i, e := range n.Content {
		if err := c.Runs[i].decodeNode(e); err != nil {
			d.add(e, fmt.Sprintf("%s[%d]", path, i), "%v", err)
		}
	}
}

// loadProfile reads the profile the mapping names (`default`, or a file
// relative to the scenario) and keeps its part for the scenario's mode;
// problems point at the profile or backend key.
func (c *SyncCost) loadProfile(d *decoder, n *yaml.Node, path string) {
	at := func(key string) *yaml.Node {
		if v := valueNode(n, key); v != nil {
			return v
		}
		return n
	}
	if c.Profile == "" {
		if c.Backend != "" {
			d.add(at("backend"), join(path, "backend"), "backend picks a profile's iptables part: give a profile too")
		}
		return
	}
	if d.mode == nil {
		return // proxy.mode's own problem is reported
	}
	part, err := profilePart(d.mode.Name(), c.Backend)
	if err != nil {
		d.add(at("backend"), join(path, "backend"), "%v", err)
		return
	}
	prof, err := c.readProfile(d)
	if err != nil {
		d.add(at("profile"), join(path, "profile"), "%v", err)
		return
	}
	m, err := prof.Mode(part)
	if err != nil {
		d.add(at("profile"), join(path, "profile"), "%v", err)
		return
	}
	c.profile = m
}

// profilePart is the profile part a mode uses: iptables through its
// backend (nft unless told), nftables, IPVS.
func profilePart(mode, backend string) (string, error) {
	switch mode {
	case "iptables":
		switch backend {
		case "", "nft":
			return costprofile.IPTablesNFT, nil
		case "legacy":
			return costprofile.IPTablesLegacy, nil
		}
		return "", fmt.Errorf("unknown iptables backend %q (want nft or legacy)", backend)
	case "nftables":
		if backend != "" {
			return "", fmt.Errorf("backend is the iptables mode's (nft or legacy); the %s mode has none", mode)
		}
		return costprofile.NFTables, nil
	case "ipvs":
		if backend != "" {
			return "", fmt.Errorf("backend is the iptables mode's (nft or legacy); the %s mode has none", mode)
		}
		return costprofile.IPVS, nil
	}
	return "", fmt.Errorf("no cost profile part for mode %s", mode)
}

// readProfile is a profile by name (costprofile.Named) or a JSON file in
// the scenario's folder.
func (c *SyncCost) readProfile(d *decoder) (*costprofile.Profile, error) {
	if !strings.HasSuffix(c.Profile, ".json") {
		return costprofile.Named(c.Profile)
	}
	data, err := d.folder.read(c.Profile)
	if err != nil {
		return nil, fmt.Errorf("profile file %s: %w", c.Profile, err)
	}
	p, err := costprofile.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("profile file %s: %w", c.Profile, err)
	}
	return p, nil
}

// Model is the cost as the world takes it.
func (c SyncCost) Model() sim.CostModel {
	m := sim.CostModel{Fixed: c.Fixed.D(), PerService: c.PerService.D(), PerEndpoint: c.PerEndpoint.D(),
		Speed: c.Speed, Jitter: c.Jitter.D(), JitterSeed: c.JitterSeed}
	if c.profile != nil {
		m.Work = c.profile
	}
	for _, r := range c.Runs {
		m.Runs = append(m.Runs, r.D())
	}
	return m
}

// validateRunnerVocabulary checks the proxy fields that shape the runner
// beyond its intervals.
func (d *decoder) validateRunnerVocabulary(p *Proxy) {
	if p.BurstRuns == nil {
		return
	}
	gen, err := runner.GenerationFor(p.Version)
	switch {
	case err != nil:
	case gen != runner.Burst:
		d.addAt(p.Src.At("burstRuns"), "the %s runner of kube-proxy %s has no burst; burstRuns belongs to versions up to 1.33", gen, p.Version)
	case *p.BurstRuns < 1:
		d.addAt(p.Src.At("burstRuns"), "want at least 1 run in a burst, got %d", *p.BurstRuns)
	}
}

// generationOf is the scenario's runner generation, 0 when its version is
// missing or wrong (reported elsewhere).
func (v *Validator) generationOf() runner.Generation {
	g, _ := runner.GenerationFor(v.s.Proxy.Version)
	return g
}

// SyncCostStep changes the sync cost from this instant on: a schedule of
// costs along the timeline (`syncCost: 5s` or any form proxy.syncCost takes).
type SyncCostStep struct {
	SyncCost *SyncCost `yaml:"syncCost"`
}

func init() { RegisterAction(func() Action { return &SyncCostStep{} }) }

func (*SyncCostStep) Validate(*Validator) {}
