// Package trace records what happened in a simulated world, in virtual time,
// as JSON Lines: object events delivered to the proxy and to any other
// consumer, consumers' own writes, the proxy's runs and dataplane
// operations, scenario steps and checks. One event per line, fields in a
// fixed order, so that the same scenario gives a byte-identical trace on
// every run.
package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Kinds of events.
const (
	Object    = "object"      // an informer event reached a consumer (Detail "to NAME" unless the proxy), or a consumer wrote (Why NAME)
	Resync    = "resync"      // an informer resync delivered a no-op update
	Synced    = "synced"      // an informer finished its initial list
	Request   = "run.request" // Run() was called
	Defer     = "run.defer"   // a run was held back
	Drop      = "run.drop"    // a Run() was discarded
	Start     = "run.start"
	End       = "run.end"
	Work      = "run.work"  // what a sync wrote and read (sim.Config.TraceWork)
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
	mu    sync.Mutex
	start time.Time
	now   func() time.Time
	total int

	// Keeping everything: a replay of hours records hundreds of thousands
	// of events. They are kept as records without pointers, their strings
	// interned in one table, so the garbage collector never scans them, in
	// blocks that are never moved, so no doubling copies them all again.
	blocks [][]record
	n      int
	strs   []string // strs[0] is ""
	index  map[string]uint32

	// Keeping the last keep events: a ring of plain events, no table (its
	// strings would outlive the events).
	keep int
	ring []Event
	head int

	sink      *json.Encoder
	sinkErr   error
	observers []func(Event)
}

// record is an Event whose strings are indices into the recorder's table.
type record struct {
	at, until                          Duration
	run                                int
	hasUntil                           bool
	kind, op, obj, why, detail, errMsg uint32
}

func (r *Recorder) intern(s string) uint32 {
	if s == "" {
		return 0
	}
	if i, ok := r.index[s]; ok {
		return i
	}
	if r.index == nil {
		r.index = map[string]uint32{}
		r.strs = append(r.strs, "")
	}
	i := uint32(len(r.strs))
	r.strs = append(r.strs, s)
	r.index[s] = i
	return i
}

func (r *Recorder) event(c *record) Event {
	e := Event{At: c.at, Kind: r.strs[c.kind], Op: r.strs[c.op], Object: r.strs[c.obj], Why: r.strs[c.why],
		Run: c.run, Detail: r.strs[c.detail], Err: r.strs[c.errMsg]}
	if c.hasUntil {
		u := c.until
		e.Until = &u
	}
	return e
}

// Block sizes: small worlds stay small, long replays fill maxBlock at a time.
const (
	firstBlock = 64
	maxBlock   = 8192
)

// NewRecorder records against a clock reading now, counting from start.
func NewRecorder(start time.Time, now func() time.Time) *Recorder {
	return &Recorder{start: start, now: now}
}

// Keep makes the recorder hold only the last n events (n > 0); Events and
// Tail then return those. Len still counts every event.
func (r *Recorder) Keep(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n <= 0 {
		return
	}
	held := r.held(n)
	r.blocks, r.n, r.strs, r.index = nil, 0, nil, nil
	r.keep, r.ring, r.head = n, append(make([]Event, 0, n), held...), 0
}

// Stream writes the events held so far, then every event as it is
// recorded, to w as JSON lines. The first write error is kept (see Err) and
// ends streaming.
func (r *Recorder) Stream(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sink = json.NewEncoder(w)
	r.sink.SetEscapeHTML(false)
	for _, e := range r.held(-1) {
		if r.sinkErr = r.sink.Encode(e); r.sinkErr != nil {
			return
		}
	}
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
	if r.keep > 0 {
		if len(r.ring) < r.keep {
			r.ring = append(r.ring, e)
		} else {
			r.ring[r.head] = e
			r.head = (r.head + 1) % r.keep
		}
	} else {
		r.record(e)
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

func (r *Recorder) record(e Event) {
	c := record{at: e.At, run: e.Run,
		kind: r.intern(e.Kind), op: r.intern(e.Op), obj: r.intern(e.Object), why: r.intern(e.Why),
		detail: r.intern(e.Detail), errMsg: r.intern(e.Err)}
	if e.Until != nil {
		c.until, c.hasUntil = *e.Until, true
	}
	last := len(r.blocks) - 1
	if last < 0 || len(r.blocks[last]) == cap(r.blocks[last]) {
		size := firstBlock
		if last >= 0 {
			size = min(2*cap(r.blocks[last]), maxBlock)
		}
		r.blocks = append(r.blocks, make([]record, 0, size))
		last++
	}
	r.blocks[last] = append(r.blocks[last], c)
	r.n++
}

// At converts a virtual instant into trace time.
func (r *Recorder) At(t time.Time) *Duration {
	d := Duration(t.Sub(r.start))
	return &d
}

// held returns the last n events held (all of them for n < 0), oldest
// first; r.mu is held.
func (r *Recorder) held(n int) []Event {
	if r.keep > 0 {
		ordered := append(append([]Event(nil), r.ring[r.head:]...), r.ring[:r.head]...)
		if n >= 0 && len(ordered) > n {
			ordered = ordered[len(ordered)-n:]
		}
		return ordered
	}
	skip := 0
	if n >= 0 && r.n > n {
		skip = r.n - n
	}
	out := make([]Event, 0, r.n-skip)
	for _, b := range r.blocks {
		if skip >= len(b) {
			skip -= len(b)
			continue
		}
		for i := skip; i < len(b); i++ {
			out = append(out, r.event(&b[i]))
		}
		skip = 0
	}
	return out
}

// Events returns a copy of the events held: every event, unless Keep
// bounded them.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 && len(r.ring) == 0 {
		return nil
	}
	return r.held(-1)
}

// Tail returns a copy of the last n events held.
func (r *Recorder) Tail(n int) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held(n)
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
	return fmt.Sprintf("%9s %-11s", e.At, e.Kind) + Fields(e)
}

// Fields is an event's key=value fields as Line prints them, each after a
// space, without its instant and kind.
func Fields(e Event) string {
	var b strings.Builder
	add := func(k, v string) {
		if v != "" {
			b.WriteString(" " + k + "=" + v)
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
	return b.String()
}
