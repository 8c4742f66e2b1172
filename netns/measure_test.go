package netns

import "testing"

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
