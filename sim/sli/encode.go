package sli

import (
	"encoding/binary"
	"fmt"
	"math/big"
	"slices"
	"time"
)

// A sharded cluster run (docs/cluster.md) computes each shard's part of
// the SLI in its own process and joins them: what a part holds crosses
// processes as these plain values, exactly (each rate sum as its
// big.Float's bytes, each exact value as its key), so the merged result is
// the bytes one process gives.

// ExactData is an Exact's values as keys, 8 bytes each little-endian.
type ExactData struct {
	Keys []byte `json:"keys,omitempty"`
	// Runs are repeats of a value counted rather than kept: key, count.
	Runs [][2]uint64 `json:"runs,omitempty"`
}

// Data is the set's values, to rebuild it elsewhere (ExactFromData).
func (e *Exact) Data() ExactData {
	var d ExactData
	e.each(func(k uint64) { d.Keys = binary.LittleEndian.AppendUint64(d.Keys, k) })
	for _, r := range e.runs {
		d.Runs = append(d.Runs, [2]uint64{r.key, uint64(r.count)})
	}
	return d
}

// ExactFromData rebuilds a set from Data: the same values, so the same
// quantiles.
func ExactFromData(d ExactData) (*Exact, error) {
	if len(d.Keys)%8 != 0 {
		return nil, fmt.Errorf("exact values: %d bytes is not a whole number of 8-byte keys", len(d.Keys))
	}
	e := &Exact{}
	for i := 0; i < len(d.Keys); i += 8 {
		e.add(binary.LittleEndian.Uint64(d.Keys[i:]))
	}
	for _, r := range d.Runs {
		if r[1] == 0 || r[1] > 1<<62 {
			return nil, fmt.Errorf("exact values: a run of %d", r[1])
		}
		e.runs = append(e.runs, run{r[0], int64(r[1])})
		e.n += int64(r[1])
		e.runsSorted = false
	}
	return e, nil
}

// Part is an Aggregate's state: its configuration and run, the rate sums
// at each evaluation, and every value for the exact quantiles.
type Part struct {
	End            time.Duration `json:"end"`
	ScrapeInterval time.Duration `json:"scrapeInterval"`
	EvalInterval   time.Duration `json:"evalInterval"`
	RateWindow     time.Duration `json:"rateWindow"`
	Buckets        []float64     `json:"buckets"`
	Nodes          int           `json:"nodes"`
	// Present lists the evaluations that had data.
	Present []int `json:"present,omitempty"`
	// Sums are the non-zero rate sums: evaluation, bucket, and the
	// big.Float's gob bytes (exact, with its precision).
	Sums  []SumData `json:"sums,omitempty"`
	Truth ExactData `json:"truth"`
}

// SumData is one rate sum of a Part.
type SumData struct {
	Eval   int    `json:"e"`
	Bucket int    `json:"b"`
	Value  []byte `json:"v"`
}

// Part is the aggregate's state so far, to merge elsewhere
// (FromPart, Merge).
func (a *Aggregate) Part() (Part, error) {
	p := Part{End: a.end, ScrapeInterval: a.cfg.ScrapeInterval, EvalInterval: a.cfg.EvalInterval,
		RateWindow: a.cfg.RateWindow, Buckets: slices.Clone(a.cfg.Buckets), Nodes: a.nodes}
	for e, ok := range a.present {
		if ok {
			p.Present = append(p.Present, e)
		}
	}
	for e, row := range a.sums {
		for b, s := range row {
			if s == nil {
				continue
			}
			v, err := s.GobEncode()
			if err != nil {
				return Part{}, err
			}
			p.Sums = append(p.Sums, SumData{Eval: e, Bucket: b, Value: v})
		}
	}
	all := &Exact{}
	all.Merge(a.truth)
	for _, k := range a.kept {
		all.Merge(k)
	}
	p.Truth = all.Data()
	return p, nil
}

// FromPart rebuilds an aggregate from Part, refusing one that does not
// fit its own configuration.
func FromPart(p Part) (*Aggregate, error) {
	a := New(Config{ScrapeInterval: p.ScrapeInterval, EvalInterval: p.EvalInterval, RateWindow: p.RateWindow, Buckets: p.Buckets}, p.End)
	if a.cfg.ScrapeInterval != p.ScrapeInterval || a.cfg.EvalInterval != p.EvalInterval || a.cfg.RateWindow != p.RateWindow ||
		!slices.Equal(a.cfg.Buckets, p.Buckets) || len(p.Buckets) == 0 {
		return nil, fmt.Errorf("SLI part: intervals or buckets missing or out of order")
	}
	a.nodes = p.Nodes
	for _, e := range p.Present {
		if e < 0 || e >= len(a.evals) {
			return nil, fmt.Errorf("SLI part: evaluation %d outside the run's %d", e, len(a.evals))
		}
		a.present[e] = true
	}
	for _, s := range p.Sums {
		if s.Eval < 0 || s.Eval >= len(a.evals) || s.Bucket < 0 || s.Bucket > len(a.cfg.Buckets) {
			return nil, fmt.Errorf("SLI part: sum at evaluation %d, bucket %d is outside the run", s.Eval, s.Bucket)
		}
		var f big.Float
		if err := f.GobDecode(s.Value); err != nil {
			return nil, fmt.Errorf("SLI part: sum at evaluation %d, bucket %d: %w", s.Eval, s.Bucket, err)
		}
		sum := a.sum(s.Eval, s.Bucket)
		sum.Add(sum, &f)
	}
	t, err := ExactFromData(p.Truth)
	if err != nil {
		return nil, fmt.Errorf("SLI part: %w", err)
	}
	a.truth = t
	return a, nil
}
