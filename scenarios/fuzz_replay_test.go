package scenarios_test

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/proxysim/proxysim/scenarios"
	"github.com/proxysim/proxysim/scenarios/replay"
)

// FuzzReplay replays whatever the loader accepts, under a small budget: a
// mutated scenario must pass, fail, or stop at its budget, never panic, hang
// or grow without bound. It stays beside the loader's fuzzers (an external
// test of scenarios) so that make fuzz finds it there.
func FuzzReplay(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/hostile/*.yaml")
	more, _ := filepath.Glob("testdata/failing/*.yaml")
	for _, p := range append(seeds, more...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	_ = fs.WalkDir(scenarios.Library(), ".", func(p string, d fs.DirEntry, err error) error {
		// A large scenario is minutes of work per input (LargeTag).
		if err == nil && !d.IsDir() && path.Dir(p) == "." && !scenarios.IsLarge(strings.TrimSuffix(p, ".yaml")) {
			if b, err := fs.ReadFile(scenarios.Library(), p); err == nil {
				f.Add(b)
			}
		}
		return nil
	})
	web, _ := fs.ReadFile(scenarios.Library(), "manifests/web.yaml")
	dir := fstest.MapFS{"manifests/web.yaml": {Data: web}}
	const budget = 20000
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := scenarios.Parse("fuzz.yaml", data, dir)
		if err != nil {
			return
		}
		if s.Length() > 10*time.Hour {
			// Long timelines are the budget's business, already covered
			// by the hostile corpus; keep each input quick.
			return
		}
		res, err := replay.Replay(s, replay.Options{MaxEvents: budget, TraceKeep: 64})
		var be *replay.BudgetError
		switch {
		case errors.As(err, &be):
			if be.Used > budget+1000 {
				t.Fatalf("budget %d overrun: %d", budget, be.Used)
			}
		case err != nil:
			// A replay that cannot run (a connection the fake refuses to
			// open, say) is a clean error, never a panic.
		case res.Trace.Len() > 2*budget:
			t.Fatalf("%d trace events under a budget of %d", res.Trace.Len(), budget)
		}
	})
}
