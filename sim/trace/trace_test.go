package trace

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// The recorder stores events compactly; what comes out must be what went in,
// stamped with the time, across many blocks.
func TestRecorderReturnsWhatWasAdded(t *testing.T) {
	start := time.Unix(0, 0)
	now := start
	r := NewRecorder(start, func() time.Time { return now })
	if r.Events() != nil || r.Len() != 0 {
		t.Fatal("a new recorder has events")
	}
	var want []Event
	for i := 0; i < 20000; i++ {
		now = now.Add(time.Millisecond)
		e := Event{Kind: Dataplane, Op: "add-rs", Detail: fmt.Sprintf("rs %d", i%37), Run: i % 5}
		switch i % 4 {
		case 1:
			e = Event{Kind: Defer, Why: "cooldown", Until: r.At(now.Add(time.Second))}
		case 2:
			e = Event{Kind: Note, Object: "Service a/b", Err: "boom"}
		}
		r.Add(e)
		e.At = Duration(now.Sub(start))
		want = append(want, e)
	}
	got := r.Events()
	if r.Len() != len(want) || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %d events, want %d; equal: %v", r.Len(), len(want), reflect.DeepEqual(got, want))
	}
}
