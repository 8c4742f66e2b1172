package trace

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
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

// Bounded, a recorder holds the last n events, still counts them all, and
// streams and reports every one as it comes.
func TestRecorderKeepStreamObserve(t *testing.T) {
	start := time.Unix(0, 0)
	now := start
	r := NewRecorder(start, func() time.Time { return now })
	add := func(i int) {
		now = now.Add(time.Second)
		r.Add(Event{Kind: Note, Detail: fmt.Sprint(i)})
	}
	for i := 0; i < 10; i++ {
		add(i)
	}
	if got := r.Tail(3); len(got) != 3 || got[0].Detail != "7" || got[2].Detail != "9" {
		t.Fatalf("tail of everything: %v", got)
	}
	var streamed bytes.Buffer
	var seen []string
	r.Keep(4)
	r.Stream(&streamed)
	r.Observe(func(e Event) { seen = append(seen, e.Detail) })
	if got := r.Events(); len(got) != 4 || got[0].Detail != "6" {
		t.Fatalf("after Keep(4): %v", got)
	}
	for i := 10; i < 25; i++ {
		add(i)
	}
	got := r.Events()
	if r.Len() != 25 || len(got) != 4 || got[0].Detail != "21" || got[3].Detail != "24" || got[3].At != Duration(25*time.Second) {
		t.Fatalf("len %d, held %v", r.Len(), got)
	}
	if tail := r.Tail(2); len(tail) != 2 || tail[0].Detail != "23" {
		t.Fatalf("tail: %v", tail)
	}
	// The stream starts with what was held when it was opened.
	if lines := strings.Count(streamed.String(), "\n"); lines != 19 || !strings.HasPrefix(streamed.String(), `{"at":"7s","ev":"note","detail":"6"}`) {
		t.Fatalf("streamed %d lines:\n%s", lines, streamed.String())
	}
	if len(seen) != 15 || seen[14] != "24" {
		t.Fatalf("observed %v", seen)
	}
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
}
