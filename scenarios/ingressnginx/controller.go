// Package ingressnginx switches the ingress-nginx sync loop (sim/ingress)
// on in a scenario, under `controllers: {ingressNginx: {...}}`, with its
// fault parts and expectations. It registers itself when imported.
package ingressnginx

import (
	"fmt"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
	"github.com/proxysim/proxysim/sim/ingress"
)

// Key is the controller's key under `controllers:`.
const Key = "ingressNginx"

func init() { scenarios.RegisterController(plugin{}) }

type plugin struct{}

func (plugin) Key() string                               { return Key }
func (plugin) NewSettings() scenarios.ControllerSettings { return &Settings{} }
func (plugin) Actions() []func() scenarios.Action {
	return []func() scenarios.Action{func() scenarios.Action { return &churnStep{} }}
}

func (plugin) Faults() []func() scenarios.Action {
	return []func() scenarios.Action{func() scenarios.Action { return &faults{} }}
}

func (plugin) Expectations() []func() scenarios.Expectation {
	return []func() scenarios.Expectation{
		func() scenarios.Expectation { return &reloadsExpect{} },
		func() scenarios.Expectation { return &dynamicExpect{} },
		func() scenarios.Expectation { return &backendsExpect{} },
		func() scenarios.Expectation { return &latencyExpect{} },
		func() scenarios.Expectation { return &metricsExpect{} },
	}
}

// Settings are the controller's flags, as scenario fields.
type Settings struct {
	SyncRateLimit               *scenarios.Decimal  `yaml:"syncRateLimit"`
	RingSize                    *int                `yaml:"ringSize"`
	DynamicConfigurationRetries *int                `yaml:"dynamicConfigurationRetries"`
	ReloadCost                  *scenarios.Duration `yaml:"reloadCost"`
	IngressClass                string              `yaml:"ingressClass"`
	ControllerClass             string              `yaml:"controllerClass"`
	WatchIngressWithoutClass    bool                `yaml:"watchIngressWithoutClass"`
	ConfigMap                   string              `yaml:"configMap"`
	AnnotationsPrefix           string              `yaml:"annotationsPrefix"`
	Src                         scenarios.Src
}

func (s *Settings) Validate(v *scenarios.Validator) {
	if s.SyncRateLimit != nil && *s.SyncRateLimit <= 0 {
		v.Errorf(s.Src.At("syncRateLimit"), "must be more than 0, got %v", float64(*s.SyncRateLimit))
	}
	if s.RingSize != nil && *s.RingSize < 1 {
		v.Errorf(s.Src.At("ringSize"), "must be at least 1, got %d", *s.RingSize)
	}
	if s.DynamicConfigurationRetries != nil && *s.DynamicConfigurationRetries < 0 {
		v.Errorf(s.Src.At("dynamicConfigurationRetries"), "must not be negative, got %d", *s.DynamicConfigurationRetries)
	}
	if s.ConfigMap != "" {
		if ns, name, ok := cut(s.ConfigMap); !ok || ns == "" || name == "" {
			v.Errorf(s.Src.At("configMap"), "want namespace/name, got %q", s.ConfigMap)
		}
	}
}

func cut(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}

// config is the controller's configuration from the settings.
func (s *Settings) config() ingress.Config {
	cfg := ingress.DefaultConfig()
	if s.SyncRateLimit != nil {
		cfg.SyncRateLimit = float64(*s.SyncRateLimit)
	}
	if s.RingSize != nil {
		cfg.RingSize = *s.RingSize
	}
	if s.DynamicConfigurationRetries != nil {
		cfg.DynamicConfigurationRetries = *s.DynamicConfigurationRetries
	}
	if s.ReloadCost != nil {
		cfg.ReloadCost = s.ReloadCost.D()
	}
	if s.IngressClass != "" {
		cfg.IngressClassAnnotation = s.IngressClass
	}
	if s.ControllerClass != "" {
		cfg.Controller = s.ControllerClass
	}
	cfg.WatchIngressWithoutClass = s.WatchIngressWithoutClass
	if s.ConfigMap != "" {
		cfg.ConfigMap = s.ConfigMap
	}
	if s.AnnotationsPrefix != "" {
		cfg.AnnotationsPrefix = s.AnnotationsPrefix
	}
	return cfg
}

func (s *Settings) Attach(r *replay.Run) error {
	c, err := ingress.New(r.World(), s.config())
	if err != nil {
		return err
	}
	if err := r.World().Subscribe(c); err != nil {
		return err
	}
	r.SetController(Key, c)
	return nil
}

// of is the replay's controller.
func of(r *replay.Run) *ingress.Controller {
	c, _ := r.Controller(Key).(*ingress.Controller)
	return c
}

// needs reports a part used without the controller switched on.
func needs(v *scenarios.Validator, p scenarios.Pos) {
	if !v.Enabled(Key) {
		v.Errorf(p, "needs the ingress-nginx controller: add controllers: {%s: {}}", Key)
	}
}

// faults are the controller's fault parts.
type faults struct {
	ReloadFailures *int `yaml:"ingressReloadFailures"`
	PostFailures   *int `yaml:"ingressPostFailures"`
	Src            scenarios.Src
}

func (f *faults) Validate(v *scenarios.Validator) {
	for _, p := range []struct {
		key string
		n   *int
	}{{"ingressReloadFailures", f.ReloadFailures}, {"ingressPostFailures", f.PostFailures}} {
		key, n := p.key, p.n
		if n == nil {
			continue
		}
		needs(v, f.Src.At(key))
		if *n < 1 {
			v.Errorf(f.Src.At(key), "must be at least 1, got %d", *n)
		}
	}
}

func (f *faults) Do(r *replay.Run) error {
	c := of(r)
	if f.ReloadFailures != nil {
		r.Step("fault", "", fmt.Sprintf("the next %d ingress-nginx reloads fail", *f.ReloadFailures))
		c.FailReloads(*f.ReloadFailures)
	}
	if f.PostFailures != nil {
		r.Step("fault", "", fmt.Sprintf("the next %d ingress-nginx backend posts fail", *f.PostFailures))
		c.FailPosts(*f.PostFailures)
	}
	return nil
}
