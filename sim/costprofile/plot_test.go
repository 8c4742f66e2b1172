package costprofile

import (
	"bytes"
	"flag"
	"os"
	"testing"
)

var updatePlot = flag.Bool("update-plot", false, "rewrite docs/images/cost-profile-default.svg (make profile-plot)")

// The default profile's curves in the README and docs/cost-profiles.md are
// drawn from the embedded profile: a new profile (or a change to how SVG
// draws one) makes the committed picture stale, and this fails until
// `make profile-plot` redraws it.
func TestDefaultProfilePlotIsCurrent(t *testing.T) {
	const file = "../../docs/images/cost-profile-default.svg"
	p, err := Named("default")
	if err != nil {
		t.Fatal(err)
	}
	want := p.SVG()
	if *updatePlot {
		if err := os.WriteFile(file, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what the default profile draws now: run `make profile-plot` and review the picture", file)
	}
	// What the caption says comes from the profile: it names the machine.
	for _, s := range []string{p.Machine.CPU, p.Machine.Kernel, p.Machine.Date} {
		if s == "" || !bytes.Contains(want, []byte(esc(s))) {
			t.Errorf("the plot does not name %q", s)
		}
	}
}
