package replay

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/proxysim/proxysim/scenarios"
)

// attachControllers subscribes every switched-on controller to the world,
// by key.
func (r *replayer) attachControllers() error {
	cs := &r.s.Controllers
	keys := make([]string, 0, len(cs.On))
	for k := range cs.On {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		run := &Run{r: r, step: -1, src: cs.Src}
		a, ok := cs.On[k].(Attacher)
		if !ok {
			return fmt.Errorf("%s: controllers.%s: %T has no replay (it implements no replay.Attacher)", r.s.File, k, cs.On[k])
		}
		if err := a.Attach(run); err != nil {
			return fmt.Errorf("%s: controllers.%s: %w", r.s.File, k, err)
		}
	}
	return nil
}

// SetController keeps a controller's replay state under its key.
func (r *Run) SetController(key string, x any) {
	if r.r.controllers == nil {
		r.r.controllers = map[string]any{}
	}
	r.r.controllers[key] = x
}

// Controller is what SetController kept under key (nil if none).
func (r *Run) Controller(key string) any { return r.r.controllers[key] }

// CheckInstants checks such an expectation (named what in failures) against
// the instants, in order, at which the thing counted happened.
func (r *Run) CheckInstants(what string, e *scenarios.SyncExpect, instants []time.Duration) {
	if len(e.Between) == 2 {
		var in []time.Duration
		for _, t := range instants {
			if t >= e.Between[0].D() && t <= e.Between[1].D() {
				in = append(in, t)
			}
		}
		instants = in
	}
	list := make([]string, len(instants))
	for i, t := range instants {
		list[i] = t.String()
	}
	got := "[" + strings.Join(list, " ") + "]"
	n := len(instants)
	if e.Count != nil && n != *e.Count {
		r.Fail(e.Src.At("count"), what+".count", fmt.Sprint(*e.Count), fmt.Sprintf("%d %s", n, got))
	}
	if e.AtLeast != nil && n < *e.AtLeast {
		r.Fail(e.Src.At("atLeast"), what+".atLeast", fmt.Sprintf("at least %d", *e.AtLeast), fmt.Sprintf("%d %s", n, got))
	}
	if e.AtMost != nil && n > *e.AtMost {
		r.Fail(e.Src.At("atMost"), what+".atMost", fmt.Sprintf("at most %d", *e.AtMost), fmt.Sprintf("%d %s", n, got))
	}
	if e.At != nil {
		want := make([]string, len(e.At))
		for i, d := range e.At {
			want[i] = d.String()
		}
		if w := "[" + strings.Join(want, " ") + "]"; w != got {
			r.Fail(e.Src.At("at"), what+".at", w, got)
		}
	}
}

// Async reports an error met inside the clock (a controller's own churn
// timer, say), where no caller can take it: the replay stops with it, as
// with a churn step's.
func (r *Run) Async(err error) {
	if err != nil && r.r.churnErr == nil {
		r.r.churnErr = fmt.Errorf("%s: %w", r.where(), err)
	}
}
