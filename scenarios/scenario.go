package scenarios

import (
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/proxysim/proxysim/sim/costprofile"
)

// Scenario is one parsed scenario file.
type Scenario struct {
	Name        string   `yaml:"name"`
	Description string   `yaml:"description"`
	Tags        []string `yaml:"tags"`
	Proxy       Proxy    `yaml:"proxy"`
	// Objects are the cluster's objects before the proxy starts: manifests,
	// or {file: path} entries naming YAML files relative to the scenario.
	Objects []yaml.Node `yaml:"objects"`
	// Cluster is a cluster made at load (cluster.generate), whose objects
	// come before Objects'.
	Cluster *Cluster `yaml:"cluster"`
	// Controllers are the consumers besides the proxy the scenario runs.
	Controllers Controllers `yaml:"controllers"`
	Timeline    []Step      `yaml:"timeline"`
	Src         Src

	// Filled by Load.
	File    string   `yaml:"-"`
	Dir     string   `yaml:"-"`
	Initial []Object `yaml:"-"`
	// Warnings are what loading noted without refusing the file: objects
	// of a dump skipped, settings of proxy.config not modelled.
	Warnings Problems `yaml:"-"`
	source   []byte
	folder   folder        // where the files it names are
	base     string        // the scenario's own name in folder ("" if parsed from memory)
	inline   inlineObjects // objects cut out of a large file, decoded like a manifest file
	loadOpts LoadOptions   // how it was read, for WithSettings
	nodes    []ClusterNode // cluster.pools' nodes, the first the proxy's
}

// Proxy is the proxy under test: the fields every mode shares, and the
// mode's own (Settings).
type Proxy struct {
	Mode             string    `yaml:"mode"`
	Version          string    `yaml:"version"`
	MinSyncPeriod    *Duration `yaml:"minSyncPeriod"`
	SyncPeriod       *Duration `yaml:"syncPeriod"`
	RetryInterval    *Duration `yaml:"retryInterval"`
	ConfigSyncPeriod *Duration `yaml:"configSyncPeriod"`
	NodeName         string    `yaml:"nodeName"`
	Zone             string    `yaml:"zone"`
	SyncCost         SyncCost  `yaml:"syncCost"`
	// BurstRuns is the burst runner's bucket size (burst generation only;
	// kube-proxy hard-codes 2).
	BurstRuns *int `yaml:"burstRuns"`
	// SyncFailsOnError makes a failed dataplane operation fail the sync (as
	// kube-proxy's iptables and nftables proxiers do); kube-proxy's IPVS
	// proxier only logs it.
	SyncFailsOnError bool `yaml:"syncFailsOnError"`
	// Config names a kube-proxy configuration file (a KubeProxyConfiguration
	// or the kube-proxy ConfigMap), relative to the scenario; the settings
	// above, given, win over it. KubeProxy is the file as read.
	Config    string           `yaml:"config"`
	KubeProxy *KubeProxyConfig `yaml:"-"`
	Src       Src
	// Settings are the mode's own fields, decoded from the same mapping;
	// nil when the mode is unknown.
	Settings Settings
}

// SyncCost is how long each sync takes in virtual time: a model (fixed,
// per service port, per endpoint), or written as a list, each runner run's
// own cost in order (Runs; see synccost.go).
type SyncCost struct {
	Fixed       Duration   `yaml:"fixed"`
	PerService  Duration   `yaml:"perService"`
	PerEndpoint Duration   `yaml:"perEndpoint"`
	Runs        []Duration `yaml:"-"`
	// Profile names a cost profile (`default`, or a JSON file relative to
	// the scenario): each sync then also costs what the profile makes of
	// its work. Backend picks the iptables mode's part (nft or legacy).
	Profile string `yaml:"profile"`
	Backend string `yaml:"backend"`
	// profile is Profile loaded, the part for the scenario's mode.
	profile *costprofile.ModeProfile `yaml:"-"`
	// Speed, Jitter and JitterSeed are a pool node's variation (see
	// sim.CostModel); zero for a scenario's single node.
	Speed      float64  `yaml:"-"`
	Jitter     Duration `yaml:"-"`
	JitterSeed uint64   `yaml:"-"`
}

// Step is one instant of the timeline: at most one action, and optionally
// expectations checked right after it.
type Step struct {
	At     *Duration `yaml:"at"`
	Note   string    `yaml:"note"`
	Expect *Expect   `yaml:"expect"`
	Src    Src
	// Actions are the step's actions, core and the mode's, in the order
	// they run; a valid step has at most one.
	Actions []Action
}

// ObjectRef names an object.
type ObjectRef struct {
	Kind      string `yaml:"kind"`
	Namespace string `yaml:"namespace"`
	Name      string `yaml:"name"`
	// GracePeriod deletes a Pod gracefully: terminating for this long,
	// then gone.
	GracePeriod *Duration `yaml:"gracePeriod"`
	Src         Src
}

// Patch changes part of an existing object: a strategic merge patch, or for
// an EndpointSlice, one endpoint's conditions.
type Patch struct {
	Kind       string      `yaml:"kind"`
	Namespace  string      `yaml:"namespace"`
	Name       string      `yaml:"name"`
	Merge      *yaml.Node  `yaml:"merge"`
	Endpoint   string      `yaml:"endpoint"`
	Conditions *Conditions `yaml:"conditions"`
	Src        Src
}

// Conditions are EndpointSlice endpoint conditions; unset ones are left.
type Conditions struct {
	Ready       *bool `yaml:"ready"`
	Serving     *bool `yaml:"serving"`
	Terminating *bool `yaml:"terminating"`
}

// Churn flips one endpoint's ready condition Count times, Every apart,
// starting at the step's instant: steady EndpointSlice churn.
type Churn struct {
	Namespace string   `yaml:"namespace"`
	Name      string   `yaml:"name"` // the EndpointSlice
	Endpoint  string   `yaml:"endpoint"`
	Count     int      `yaml:"count"`
	Every     Duration `yaml:"every"`
	Src       Src
}

// Fault injects a failure: a broken watch, or a mode's own faults (its
// Parts, which run first).
type Fault struct {
	// WatchBreak holds informer deliveries for this long, then delivers a
	// relist: the net change of every object, as a re-listing informer would.
	WatchBreak *Duration `yaml:"watchBreak"`
	Src        Src
	Parts      []Action
	keys       []string // the mode's fault keys, for messages
}

// Expect is what must be true at a step. With Within, it must become true at
// some instant up to that long after the step.
type Expect struct {
	Within *Duration `yaml:"within"`
	Src    Src
	// Checks are the expectations given, core and the mode's, in the order
	// they are checked.
	Checks []Expectation
}

// CountExpect counts events, optionally only within a window [from, to].
type CountExpect struct {
	Count   *int       `yaml:"count"`
	AtLeast *int       `yaml:"atLeast"`
	AtMost  *int       `yaml:"atMost"`
	Between []Duration `yaml:"between"`
	Src     Src
}

// SyncExpect counts sync runs (the initial direct sync included), optionally
// only those that started in a window [from, to].
type SyncExpect struct {
	Count   *int       `yaml:"count"`
	AtLeast *int       `yaml:"atLeast"`
	AtMost  *int       `yaml:"atMost"`
	At      []Duration `yaml:"at"`
	Between []Duration `yaml:"between"`
	Src     Src
}

// LatencyExpect bounds the propagation latency of an object's latest change:
// from its API write to the end of the first sync that could carry it (the
// first to start after the proxy heard of it).
//
// With Pod instead of Object, it bounds the true network programming latency
// of the pod's latest readiness change (sim.World.PodLatency): from the
// change to the end of the first successful sync that carried it, through
// whatever controller wrote the slices.
type LatencyExpect struct {
	Object string    `yaml:"object"` // "Kind namespace/name"
	Pod    string    `yaml:"pod"`    // "name" or "namespace/name"
	Max    *Duration `yaml:"max"`
	Exact  *Duration `yaml:"exact"`
	Src    Src
}

// Length is when the timeline's last step happens.
func (s *Scenario) Length() time.Duration {
	var end time.Duration
	for _, st := range s.Timeline {
		if st.At != nil && st.At.D() > end {
			end = st.At.D()
		}
		// Load refused every sum that would overflow.
		for _, a := range st.Actions {
			if c, ok := a.(*ChurnStep); ok && c.Churn != nil && st.At != nil {
				if e, ok := churnEnd(*st.At, c.Churn.Count, c.Churn.Every); ok && e.D() > end {
					end = e.D()
				}
			}
		}
		if st.Expect != nil && st.Expect.Within != nil && st.At != nil {
			if e, ok := addInstant(*st.At, *st.Expect.Within); ok && e.D() > end {
				end = e.D()
			}
		}
	}
	return end
}
