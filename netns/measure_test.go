package netns

import (
	"strings"
	"testing"
)

// A sample whose only surprise is a few timeouts (at most a tenth) is
// sampled again; more, or any other unpredicted outcome, is not.
func TestStrayTimeouts(t *testing.T) {
	half := map[string]float64{"a": 0.5, "b": 0.5}
	for _, tc := range []struct {
		name   string
		m      Measurement
		resamp bool
	}{
		{"none", Measurement{N: 400, Predicted: half, Counts: map[string]int{"a": 200, "b": 200}}, false},
		{"a tenth", Measurement{N: 400, Predicted: half, Counts: map[string]int{"a": 190, "b": 170, OutcomeTimeout: 40}}, true},
		{"more", Measurement{N: 400, Predicted: half, Counts: map[string]int{"a": 190, "b": 169, OutcomeTimeout: 41}}, false},
		{"another outcome", Measurement{N: 400, Predicted: half, Counts: map[string]int{"a": 190, "b": 190, OutcomeTimeout: 10, "c": 10}}, false},
		{"in a pair", Measurement{N: 400, Predicted: map[string]float64{"a -> a": 1}, Counts: map[string]int{"a -> a": 399, "a -> " + OutcomeTimeout: 1}}, true},
		{"predicted", Measurement{N: 16, Predicted: map[string]float64{OutcomeTimeout: 1}, Counts: map[string]int{OutcomeTimeout: 16}}, false},
	} {
		if got := tc.m.strayTimeouts(); got != tc.resamp {
			t.Errorf("%s: strayTimeouts = %v, want %v", tc.name, got, tc.resamp)
		}
	}
}

// Masquerade is judged per outcome, all or nothing as predicted; a part
// strictly between is not judged, and an outcome nobody reached says
// nothing.
func TestMasqueradeOff(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    Measurement
		off  string
	}{
		{"all, as predicted", Measurement{N: 16, Predicted: map[string]float64{"a": 1}, PredictedMasq: map[string]float64{"a": 1}, Counts: map[string]int{"a": 16}, Masqueraded: map[string]int{"a": 16}}, ""},
		{"none, as predicted", Measurement{N: 16, Predicted: map[string]float64{"a": 1}, PredictedMasq: map[string]float64{"a": 0}, Counts: map[string]int{"a": 16}}, ""},
		{"one kept its source", Measurement{N: 16, Predicted: map[string]float64{"a": 1}, PredictedMasq: map[string]float64{"a": 1}, Counts: map[string]int{"a": 16}, Masqueraded: map[string]int{"a": 15}}, "a: 15 of 16 masqueraded, predicted all"},
		{"one rewritten", Measurement{N: 16, Predicted: map[string]float64{"a": 1}, PredictedMasq: map[string]float64{"a": 0}, Counts: map[string]int{"a": 16}, Masqueraded: map[string]int{"a": 1}}, "a: 1 of 16 masqueraded, predicted none"},
		{"a part", Measurement{N: 16, Predicted: map[string]float64{"a": 1}, PredictedMasq: map[string]float64{"a": 0.5}, Counts: map[string]int{"a": 16}, Masqueraded: map[string]int{"a": 3}}, ""},
		{"not checked", Measurement{N: 16, Predicted: map[string]float64{"a": 1}, Counts: map[string]int{"a": 16}, Masqueraded: map[string]int{"a": 16}}, ""},
	} {
		err := tc.m.Agrees()
		switch {
		case tc.off == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.off != "" && (err == nil || !strings.Contains(err.Error(), "masquerade is off: "+tc.off)):
			t.Errorf("%s: got %v, want masquerade is off: %s", tc.name, err, tc.off)
		}
	}
}
