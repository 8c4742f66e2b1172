// Package trace records what a simulated proxy did, in virtual time, as JSON
// Lines: one event per line, fields in a fixed order, so that the same
// scenario gives a byte-identical trace on every run.
package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// Kinds of events.
const (
	Object    = "object"      // an informer event reached the proxy
	Resync    = "resync"      // an informer resync delivered a no-op update
	Synced    = "synced"      // an informer finished its initial list
	Request   = "run.request" // Run() was called
	Defer     = "run.defer"   // a run was held back
	Drop      = "run.drop"    // a Run() was discarded
	Start     = "run.start"
	End       = "run.end"
	Dataplane = "dataplane" // one dataplane operation
	Step      = "step"      // a scenario step
	Conn      = "conn"      // a client connection opened or closed
	Check     = "check"     // an expectation passed or failed
	Note      = "note"
)

// Event is one line of a trace. At is the virtual time since the start of
// the world.
type Event struct {
	At     Duration  `json:"at"`
	Kind   string    `json:"ev"`
	Op     string    `json:"op,omitempty"`
	Object string    `json:"obj,omitempty"`
	Why    string    `json:"why,omitempty"`
	Until  *Duration `json:"until,omitempty"`
	Run    int       `json:"run,omitempty"`
	Detail string    `json:"detail,omitempty"`
	Err    string    `json:"err,omitempty"`
}

// Duration marshals as Go's duration text ("1.5s"), readable and exact.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

func (d Duration) String() string { return time.Duration(d).String() }

// Recorder collects events. It is safe for concurrent use, though a
// simulation records from one goroutine. By default it keeps every event;
// Keep bounds what it holds, and Stream writes each event out as it comes,
// so that a long replay needs no memory for its trace.
type Recorder struct {
	mu        sync.Mutex
	start     time.Time
	now       func() time.Time
	events    []Event
	keep      int // 0: all
	head      int // ring start when keep > 0 and the ring is full
	total     int
	sink      *json.Encoder
	sinkErr   error
	observers []func(Event)
}

// NewRecorder records against a clock reading now, counting from start.
func NewRecorder(start time.Time, now func() time.Time) *Recorder {
	return &Recorder{start: start, now: now}
}

// Keep makes the recorder hold only the last n events (n > 0); Events and
// Tail then return those. Len still counts every event.
func (r *Recorder) Keep(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = r.ordered()
	if n > 0 && len(r.events) > n {
		r.events = append([]Event(nil), r.events[len(r.events)-n:]...)
	}
	r.keep, r.head = n, 0
}

// Stream writes every event recorded from now on to w as a JSON line, as
// it is recorded. The first write error is kept (see Err) and ends streaming.
func (r *Recorder) Stream(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sink = json.NewEncoder(w)
	r.sink.SetEscapeHTML(false)
}

// Err is the first error writing to the stream.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sinkErr
}

// Observe calls f with every event recorded from now on, in order, on the
// recording goroutine.
func (r *Recorder) Observe(f func(Event)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.observers = append(r.observers, f)
}

// Add stamps e with the current virtual time and records it.
func (r *Recorder) Add(e Event) {
	r.mu.Lock()
	e.At = Duration(r.now().Sub(r.start))
	r.total++
	switch {
	case r.keep <= 0 || len(r.events) < r.keep:
		r.events = append(r.events, e)
	default:
		r.events[r.head] = e
		r.head = (r.head + 1) % r.keep
	}
	if r.sink != nil && r.sinkErr == nil {
		r.sinkErr = r.sink.Encode(e)
	}
	obs := r.observers
	r.mu.Unlock()
	for _, f := range obs {
		f(e)
	}
}

// At converts a virtual instant into trace time.
func (r *Recorder) At(t time.Time) *Duration {
	d := Duration(t.Sub(r.start))
	return &d
}

// ordered returns the held events oldest first; r.mu is held.
func (r *Recorder) ordered() []Event {
	if r.head == 0 {
		return r.events
	}
	return append(append([]Event(nil), r.events[r.head:]...), r.events[:r.head]...)
}

// Events returns a copy of the events held: every event, unless Keep
// bounded them.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.ordered()...)
}

// Tail returns a copy of the last n events held.
func (r *Recorder) Tail(n int) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.ordered()
	if len(ev) > n {
		ev = ev[len(ev)-n:]
	}
	return append([]Event(nil), ev...)
}

// Len is the number of events recorded so far, held or not.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// WriteJSONL writes every event as one JSON object per line (without
// HTML escaping, so "->" reads as written).
func (r *Recorder) WriteJSONL(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, e := range r.Events() {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	return nil
}

// JSONL returns the trace as JSON Lines.
func (r *Recorder) JSONL() []byte {
	var b bytes.Buffer
	_ = r.WriteJSONL(&b)
	return b.Bytes()
}

// Line renders one event for people: "  1.5s run.start why=request".
func Line(e Event) string {
	s := fmt.Sprintf("%9s %-11s", e.At, e.Kind)
	add := func(k, v string) {
		if v != "" {
			s += " " + k + "=" + v
		}
	}
	add("op", e.Op)
	add("obj", e.Object)
	add("why", e.Why)
	if e.Until != nil {
		add("until", e.Until.String())
	}
	if e.Run != 0 {
		add("run", fmt.Sprint(e.Run))
	}
	add("detail", e.Detail)
	add("err", e.Err)
	return s
}
