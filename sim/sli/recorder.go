package sli

import (
	"slices"
	"time"
)

// Recorder is one kube-proxy's histogram as Prometheus scrapes it, fed as
// the run goes: each observation is folded into the bucket counters and
// each scrape instant keeps the counters once, so a node keeps one
// vector per scrape rather than every observation (a node observing 20
// samples a second keeps 1,200 times less). Its values go to an Exact
// shared by every node, for the exact quantiles.
//
// Observe and Restart must come in time order. Observations at the
// instant of a restart count after it, whichever came first (Aggregate.Add
// has the same rule), so a sync ending at the instant its proxy restarts
// is counted as a batch of the node's observations would be.
type Recorder struct {
	cfg   Config
	phase time.Duration
	truth *Exact

	counts []float64
	exists bool
	next   time.Duration // the next scrape instant not yet taken
	// now are the values observed at the latest instant, at.
	at  time.Duration
	now []float64

	scrapes []scrape
	n       int64
}

// NewRecorder starts a node's recorder, scraped at phase in every
// interval, its values added to truth (nil: not kept).
func NewRecorder(cfg Config, phase time.Duration, truth *Exact) *Recorder {
	cfg = cfg.withDefaults()
	return &Recorder{cfg: cfg, phase: phase, truth: truth, next: phase, counts: make([]float64, len(cfg.Buckets)+1)}
}

// Config is the recorder's configuration, defaults applied.
func (r *Recorder) Config() Config { return r.cfg }

// Phase is when in each scrape interval the node is scraped.
func (r *Recorder) Phase() time.Duration { return r.phase }

// Truth is where its values go (nil: nowhere).
func (r *Recorder) Truth() *Exact { return r.truth }

// Samples counts the observations.
func (r *Recorder) Samples() int64 { return r.n }

// scrapeBefore takes the scrapes before the instant t.
func (r *Recorder) scrapeBefore(t time.Duration) {
	for ; r.next < t; r.next += r.cfg.ScrapeInterval {
		if !r.exists {
			continue
		}
		// Unchanged counters share the previous scrape's vector.
		if k := len(r.scrapes); k > 0 && slices.Equal(r.scrapes[k-1].counts, r.counts) {
			r.scrapes = append(r.scrapes, scrape{at: r.next, t: r.next.Milliseconds(), counts: r.scrapes[k-1].counts})
			continue
		}
		r.scrapes = append(r.scrapes, scrape{at: r.next, t: r.next.Milliseconds(), counts: slices.Clone(r.counts)})
	}
}

func (r *Recorder) count(v float64) {
	nb := len(r.counts)
	for b, ub := range r.cfg.Buckets {
		if v <= ub {
			r.counts[b]++
		}
	}
	r.counts[nb-1]++
	r.exists = true
}

// Observe folds one observation of v seconds at the instant at.
func (r *Recorder) Observe(at time.Duration, v float64) {
	r.scrapeBefore(at)
	if at != r.at {
		r.at, r.now = at, r.now[:0]
	}
	r.now = append(r.now, v)
	r.count(v)
	r.n++
	if r.truth != nil {
		r.truth.AddSeconds(v)
	}
}

// Restart starts the node's counters from zero at the instant at: its
// series is absent until the next observation.
func (r *Recorder) Restart(at time.Duration) {
	r.scrapeBefore(at)
	clear(r.counts)
	r.exists = false
	if at == r.at {
		for _, v := range r.now {
			r.count(v)
		}
	}
}

// scrapesUntil lists the scrapes up to end without changing the recorder:
// those taken, and those due by end with the counters as they are.
func (r *Recorder) scrapesUntil(end time.Duration) []scrape {
	out := r.scrapes
	if k := len(out); k > 0 && out[k-1].at > end {
		i, _ := slices.BinarySearchFunc(out, end, func(s scrape, t time.Duration) int { return cmpDur(s.at, t+1) })
		return out[:i]
	}
	if r.exists && r.next <= end {
		out = out[:len(out):len(out)]
		counts := slices.Clone(r.counts)
		for t := r.next; t <= end; t += r.cfg.ScrapeInterval {
			out = append(out, scrape{at: t, t: t.Milliseconds(), counts: counts})
		}
	}
	return out
}
