package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// Progress lines appear once a command has run this long, and are redrawn
// at most this often.
const (
	progressAfter = time.Second
	progressEvery = 100 * time.Millisecond
)

// progress draws one status line on a terminal, redrawn in place: how far a
// long replay or sweep has got. It says nothing when its writer is not a
// terminal (a pipe, a file, CI's log), nor during a command's first second.
// Only the CLI reads the wall clock for it: the engine reports virtual time.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	on    bool
	now   func() time.Time
	start time.Time
	last  time.Time
	width int // of the line drawn, to blank it
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// newProgress draws on w if terminal(w) holds; now is the wall clock.
func newProgress(w io.Writer, terminal func(io.Writer) bool, now func() time.Time) *progress {
	return &progress{w: w, on: terminal(w), now: now, start: now()}
}

// show redraws the line with line() when it is time to; line is called
// only then, so a caller may report on every clock step.
func (p *progress) show(line func() string) {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.now()
	if t.Sub(p.start) < progressAfter || (!p.last.IsZero() && t.Sub(p.last) < progressEvery) {
		return
	}
	p.last = t
	s := line()
	fmt.Fprintf(p.w, "\r%s\x1b[K", s)
	p.width = len(s)
}

// done blanks the line, if one was drawn, so the command's own output
// starts on a clean line.
func (p *progress) done() {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.width > 0 {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.width = 0
	}
	p.last = time.Time{}
}

// replayLine is a replay's progress: virtual time reached of the whole.
func replayLine(name string, reached, length time.Duration) string {
	pct := 100.0
	if length > 0 {
		pct = 100 * float64(reached) / float64(length)
	}
	return fmt.Sprintf("proxysim: %s: %v of %v virtual time (%.0f%%)", name, reached.Truncate(time.Millisecond), length, pct)
}

// sweepLine is a sweep's progress: points done of the shard's.
func sweepLine(name string, done, total int) string {
	return fmt.Sprintf("proxysim: sweep %s: %d/%d points done", name, done, total)
}
