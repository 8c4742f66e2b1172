package sli

import (
	"slices"
	"sort"
	"time"
)

// Recorder is one kube-proxy's histogram as Prometheus scrapes it, fed as
// the run goes: each observation is counted in its bucket and each scrape
// instant keeps only what changed since the one before (a few buckets'
// increments), so a node keeps about a hundred bytes per scrape rather
// than every observation, or every bucket's count. Its values go to an
// Exact shared by every node, for the exact quantiles.
//
// Observe and Restart must come in time order. Observations at the
// instant of a restart count after it, whichever came first (Aggregate.Add
// has the same rule), so a sync ending at the instant its proxy restarts
// is counted as a batch of the node's observations would be.
type Recorder struct {
	cfg   Config
	phase time.Duration
	truth *Exact

	// inc counts the observations since the last scrape by bucket (not
	// cumulative; the last is above every bound), touched lists the
	// buckets counted, reset says the counters restarted since.
	inc     []uint32
	touched []uint32
	reset   bool
	exists  bool
	next    time.Duration // the next scrape instant not yet taken
	// now are the values observed at the latest instant, at.
	at  time.Duration
	now []float64

	scrapes []increment
	deltas  []uint32 // bucket, count pairs of every increment in turn
	n       int64
}

// increment is one scrape as what changed since the one before: the
// bucket counts deltas[from:to] (pairs), after a restart if reset.
type increment struct {
	at       time.Duration
	from, to int32
	reset    bool
}

// NewRecorder starts a node's recorder, scraped at phase in every
// interval, its values added to truth (nil: not kept).
func NewRecorder(cfg Config, phase time.Duration, truth *Exact) *Recorder {
	cfg = cfg.withDefaults()
	return &Recorder{cfg: cfg, phase: phase, truth: truth, next: phase, inc: make([]uint32, len(cfg.Buckets)+1)}
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
		from := int32(len(r.deltas))
		slices.Sort(r.touched)
		for _, b := range r.touched {
			r.deltas = append(r.deltas, b, r.inc[b])
			r.inc[b] = 0
		}
		r.touched = r.touched[:0]
		r.scrapes = append(r.scrapes, increment{at: r.next, from: from, to: int32(len(r.deltas)), reset: r.reset})
		r.reset = false
	}
}

// bucket is the first bucket whose bound v is at or below (the last, +Inf,
// for none).
func (r *Recorder) bucket(v float64) uint32 {
	return uint32(sort.SearchFloat64s(r.cfg.Buckets, v))
}

func (r *Recorder) count(v float64) {
	b := r.bucket(v)
	if r.inc[b] == 0 {
		r.touched = append(r.touched, b)
	}
	r.inc[b]++
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
	for _, b := range r.touched {
		r.inc[b] = 0
	}
	r.touched = r.touched[:0]
	r.reset, r.exists = true, false
	if at == r.at {
		for _, v := range r.now {
			r.count(v)
		}
	}
}

// scrapesUntil lists the scrapes up to end, each bucket's cumulative
// count, without changing the recorder: those taken, and those due by end
// with the counters as they are.
func (r *Recorder) scrapesUntil(end time.Duration) []scrape {
	nb := len(r.inc)
	per := make([]float64, nb) // by bucket, not cumulative
	var out []scrape
	emit := func(at time.Duration) {
		c := make([]float64, nb)
		var sum float64
		for b := range nb {
			sum += per[b]
			c[b] = sum
		}
		out = append(out, scrape{at: at, t: at.Milliseconds(), counts: c})
	}
	for _, s := range r.scrapes {
		if s.at > end {
			return out
		}
		if s.reset {
			clear(per)
		}
		for i := s.from; i < s.to; i += 2 {
			per[r.deltas[i]] += float64(r.deltas[i+1])
		}
		emit(s.at)
	}
	if r.exists && r.next <= end {
		if r.reset {
			clear(per)
		}
		for _, b := range r.touched {
			per[b] += float64(r.inc[b])
		}
		for t := r.next; t <= end; t += r.cfg.ScrapeInterval {
			emit(t)
		}
	}
	return out
}
