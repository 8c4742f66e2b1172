package sweep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// FormatVersion names the JSON report's layout.
const FormatVersion = "proxysim-sweep/v1"

// Report is a sweep's outcome, or a shard's: the whole sweep's points, the
// indices it ran (in order) and their results (in the same order).
type Report struct {
	Format   string `json:"format"`
	Scenario string `json:"scenario"`
	// Digest is the scenario source's SHA-256: shards merge only when they
	// replayed the same document.
	Digest string  `json:"digest"`
	Axes   []Axis  `json:"axes"`
	Points []Point `json:"points"`
	// Shard is "I/N" for a shard, empty for a whole sweep.
	Shard   string   `json:"shard,omitempty"`
	Ran     []int    `json:"ran"`
	Results []Result `json:"results"`
}

// Duration is a time.Duration written as Go duration text in JSON.
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration as text, such as "1.5s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads duration text.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// JSON is the report as indented JSON, ending in a newline.
func (r *Report) JSON() []byte {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		panic(err) // only plain values: cannot fail
	}
	return append(b, '\n')
}

// ReadReport parses a report written by JSON; name is for messages.
func ReadReport(name string, data []byte) (*Report, error) {
	var r Report
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: not a sweep report: %v", name, err)
	}
	if r.Format != FormatVersion {
		return nil, fmt.Errorf("%s: format %q, want %q", name, r.Format, FormatVersion)
	}
	if err := r.check(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return &r, nil
}

// check verifies a report holds together: its points are the axes' cross
// product, and it has one result per point it ran.
func (r *Report) check() error {
	if len(r.Axes) == 0 {
		return errors.New("no axes")
	}
	want := Points(r.Axes)
	if len(want) != len(r.Points) {
		return fmt.Errorf("%d points, but its axes make %d", len(r.Points), len(want))
	}
	for i := range want {
		if want[i].Index != r.Points[i].Index || !slices.Equal(want[i].Values, r.Points[i].Values) {
			return fmt.Errorf("point %d is not its axes' point %d", r.Points[i].Index, i)
		}
	}
	if len(r.Ran) != len(r.Results) {
		return fmt.Errorf("it ran %d points but holds %d results", len(r.Ran), len(r.Results))
	}
	for i, p := range r.Ran {
		if p < 0 || p >= len(r.Points) {
			return fmt.Errorf("ran point %d, which the sweep does not have", p)
		}
		if r.Results[i].Point != p {
			return fmt.Errorf("result %d is for point %d, not %d", i, r.Results[i].Point, p)
		}
	}
	return nil
}

// Merge joins shards of one sweep into the report one run of the whole
// sweep writes. The shards must replay the same scenario (name and digest)
// over the same axes, and together run every point exactly once.
func Merge(names []string, shards []*Report) (*Report, error) {
	if len(shards) == 0 {
		return nil, errors.New("merge: give the shards' JSON files")
	}
	first := shards[0]
	byPoint := make([]*Result, len(first.Points))
	from := make([]string, len(first.Points))
	for k, s := range shards {
		switch {
		case s.Scenario != first.Scenario:
			return nil, fmt.Errorf("%s: scenario %q, but %s is of %q", names[k], s.Scenario, names[0], first.Scenario)
		case s.Digest != first.Digest:
			return nil, fmt.Errorf("%s: scenario %q from a different source (digest %.12s, %s has %.12s)", names[k], s.Scenario, s.Digest, names[0], first.Digest)
		case !sameAxes(s.Axes, first.Axes):
			return nil, fmt.Errorf("%s: swept %s, but %s swept %s", names[k], axesString(s.Axes), names[0], axesString(first.Axes))
		}
		for i, p := range s.Ran {
			if byPoint[p] != nil {
				return nil, fmt.Errorf("%s: point %d was run by %s too", names[k], p, from[p])
			}
			byPoint[p], from[p] = &s.Results[i], names[k]
		}
	}
	var missing []string
	out := &Report{Format: FormatVersion, Scenario: first.Scenario, Digest: first.Digest, Axes: first.Axes, Points: first.Points}
	for i, r := range byPoint {
		if r == nil {
			missing = append(missing, fmt.Sprint(i))
			continue
		}
		out.Ran = append(out.Ran, i)
		out.Results = append(out.Results, *r)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("merge: no shard ran point %s of %d (a shard missing?)", strings.Join(missing, ", "), len(byPoint))
	}
	return out, nil
}

func sameAxes(a, b []Axis) bool {
	return slices.EqualFunc(a, b, func(x, y Axis) bool { return x.Key == y.Key && slices.Equal(x.Values, y.Values) })
}

func axesString(axes []Axis) string {
	parts := make([]string, len(axes))
	for i, a := range axes {
		parts[i] = a.Key + "=" + strings.Join(a.Values, ",")
	}
	return strings.Join(parts, " ")
}

// Errors counts the points that could not run.
func (r *Report) Errors() int {
	n := 0
	for _, res := range r.Results {
		if res.Error != "" {
			n++
		}
	}
	return n
}
