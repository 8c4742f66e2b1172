// Package controllers plugs proxysim's Kubernetes controllers into the
// scenario format: importing it registers the keys of the top-level
// controllers mapping (docs/scenario-format.md, "controllers"):
//
//	controllers:
//	  endpointSlice: {batchPeriod: 1s, maxEndpointsPerSlice: 100, workers: 5}
//	  endpoints: {batchPeriod: 0s, workers: 5}
//
// A new controller is one more part registered here, with its own key.
package controllers

import (
	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim/controllers/endpoints"
	"github.com/proxysim/proxysim/sim/controllers/endpointslice"
)

func init() {
	scenarios.RegisterController(controller{"endpointSlice", func() scenarios.ControllerSettings { return &EndpointSlice{} }})
	scenarios.RegisterController(controller{"endpoints", func() scenarios.ControllerSettings { return &Endpoints{} }})
}

// controller is one registered controller: its steps and expectations are
// the core's (podReady, rollingUpdate, latency, programmingLatency, writes,
// endpoints), which work whatever writes the objects.
type controller struct {
	key      string
	settings func() scenarios.ControllerSettings
}

func (c controller) Key() string                                  { return c.key }
func (c controller) NewSettings() scenarios.ControllerSettings    { return c.settings() }
func (c controller) Actions() []func() scenarios.Action           { return nil }
func (c controller) Faults() []func() scenarios.Action            { return nil }
func (c controller) Expectations() []func() scenarios.Expectation { return nil }

// EndpointSlice are the EndpointSlice controller's flags.
type EndpointSlice struct {
	// BatchPeriod is --endpointslice-updates-batch-period (default 0).
	BatchPeriod *scenarios.Duration `yaml:"batchPeriod"`
	// MaxEndpointsPerSlice is --max-endpoints-per-slice (default 100,
	// 1 to 1000).
	MaxEndpointsPerSlice *int `yaml:"maxEndpointsPerSlice"`
	// Workers is --concurrent-service-endpoint-syncs (default 5, 1 to 50).
	Workers *int `yaml:"workers"`
	Src     scenarios.Src
}

func (e *EndpointSlice) Validate(v *scenarios.Validator) {
	// The ranges kube-controller-manager's flag validation enforces
	// (cmd/kube-controller-manager/app/options/endpointslicecontroller.go).
	if m := e.MaxEndpointsPerSlice; m != nil && (*m < 1 || *m > 1000) {
		v.Errorf(e.Src.At("maxEndpointsPerSlice"), "want 1 to 1000, got %d", *m)
	}
	if n := e.Workers; n != nil && (*n < 1 || *n > 50) {
		v.Errorf(e.Src.At("workers"), "want 1 to 50, got %d", *n)
	}
}

func (e *EndpointSlice) Attach(r *replay.Run) error {
	w := r.World()
	var cfg endpointslice.Config
	if e.BatchPeriod != nil {
		cfg.BatchPeriod = e.BatchPeriod.D()
	}
	if e.MaxEndpointsPerSlice != nil {
		cfg.MaxEndpointsPerSlice = *e.MaxEndpointsPerSlice
	}
	if e.Workers != nil {
		cfg.Workers = *e.Workers
	}
	return w.Subscribe(endpointslice.New(w, cfg))
}

// Endpoints are the legacy Endpoints controller's flags.
type Endpoints struct {
	// BatchPeriod is --endpoint-updates-batch-period (default 0).
	BatchPeriod *scenarios.Duration `yaml:"batchPeriod"`
	// Workers is --concurrent-endpoint-syncs (default 5, 1 to 50).
	Workers *int `yaml:"workers"`
	Src     scenarios.Src
}

func (e *Endpoints) Validate(v *scenarios.Validator) {
	if n := e.Workers; n != nil && (*n < 1 || *n > 50) {
		v.Errorf(e.Src.At("workers"), "want 1 to 50, got %d", *n)
	}
}

func (e *Endpoints) Attach(r *replay.Run) error {
	w := r.World()
	var cfg endpoints.Config
	if e.BatchPeriod != nil {
		cfg.BatchPeriod = e.BatchPeriod.D()
	}
	if e.Workers != nil {
		cfg.Workers = *e.Workers
	}
	return w.Subscribe(endpoints.New(w, cfg))
}
