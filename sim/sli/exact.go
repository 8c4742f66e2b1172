package sli

import (
	"encoding/binary"
	"math"
	"slices"
	"time"
)

// Exact holds values to take exact quantiles of: a 5,000-node hour makes
// hundreds of millions of observations, nearly all distinct (each node's
// syncs end at their own instants), so counting them by value costs more
// than keeping them. Values are kept as keys that sort as the values do:
// the latest chunkLen in a plain slice, the full chunks before them
// sorted and packed (each key as its difference from the one before, a
// few bytes rather than 8); an order statistic is found by searching the
// key space with counts from every chunk.
//
// A value added many times at once is only counted, in a run: a node
// programs a batch of pod changes made at one instant in one sync, all
// with the same latency (150,000 on every node starting up).
type Exact struct {
	packed  []packedChunk
	cur     []uint64 // the chunk being filled
	sorted  bool     // cur is sorted
	scratch []byte   // pack's
	radix   []uint64 // radixSort's
	n       int64
	// runs count a value added many times at once (addN), by key; sorted
	// by key with cumulative counts in runsAtMost when runsSorted.
	runs       []run
	runsAtMost []int64
	runsSorted bool
}

type run struct {
	key   uint64
	count int64
}

const (
	chunkLen = 1 << 20
	// groupLen keys share a start in a packed chunk's index: a count
	// decodes at most that many differences.
	groupLen = 128
)

// packedChunk is chunkLen keys, sorted: each group of groupLen starts
// with the key in the index, the others follow in data as uvarint
// differences from the key before.
type packedChunk struct {
	data  []byte
	index []packedGroup
	n     int
}

type packedGroup struct {
	first uint64
	off   uint32 // where its differences start in data
}

// pack packs keys (sorted), encoding in scratch first, so that the
// chunk's data is allocated once at its size.
func pack(keys []uint64, scratch []byte) (packedChunk, []byte) {
	pc := packedChunk{n: len(keys), index: make([]packedGroup, 0, (len(keys)+groupLen-1)/groupLen)}
	data := scratch[:0]
	for i, k := range keys {
		if i%groupLen == 0 {
			pc.index = append(pc.index, packedGroup{first: k, off: uint32(len(data))})
			continue
		}
		data = binary.AppendUvarint(data, k-keys[i-1])
	}
	pc.data = slices.Clone(data)
	return pc, data
}

// radixSort sorts keys a byte at a time from the lowest (a full chunk:
// several times faster than a comparison sort), skipping the bytes every
// key shares, with tmp as the other buffer; it returns tmp to reuse.
func radixSort(keys, tmp []uint64) []uint64 {
	if len(keys) < 2 {
		return tmp
	}
	if cap(tmp) < len(keys) {
		tmp = make([]uint64, len(keys))
	}
	tmp = tmp[:len(keys)]
	src, dst := keys, tmp
	for shift := 0; shift < 64; shift += 8 {
		var count [256]int
		for _, k := range src {
			count[byte(k>>shift)]++
		}
		if count[byte(src[0]>>shift)] == len(src) {
			continue // every key has this byte
		}
		pos := 0
		for b, c := range count {
			count[b] = pos
			pos += c
		}
		for _, k := range src {
			b := byte(k >> shift)
			dst[count[b]] = k
			count[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
	}
	return tmp
}

// atMost counts the chunk's keys at or below k.
func (pc *packedChunk) atMost(k uint64) int64 {
	g, _ := slices.BinarySearchFunc(pc.index, k, func(e packedGroup, k uint64) int {
		if e.first <= k {
			return -1 // the groups starting at or below k come first
		}
		return 1
	})
	if g == 0 {
		return 0
	}
	g--
	n := g*groupLen + 1
	end := min(pc.n, n+groupLen-1)
	v, off := pc.index[g].first, int(pc.index[g].off)
	for ; n < end; n++ {
		d, w := binary.Uvarint(pc.data[off:])
		if v += d; v > k {
			break
		}
		off += w
	}
	return int64(n)
}

// each hands f every key of the chunk, in order.
func (pc *packedChunk) each(f func(uint64)) {
	off := 0
	for g, e := range pc.index {
		v := e.first
		f(v)
		for range min(groupLen, pc.n-g*groupLen) - 1 {
			d, w := binary.Uvarint(pc.data[off:])
			v += d
			off += w
			f(v)
		}
	}
}

func (e *Exact) add(k uint64) {
	if len(e.cur) == chunkLen {
		// Full: sorted and packed, its slice filled again.
		if !e.sorted {
			e.radix = radixSort(e.cur, e.radix)
		}
		var pc packedChunk
		pc, e.scratch = pack(e.cur, e.scratch)
		e.packed = append(e.packed, pc)
		e.cur = e.cur[:0]
	}
	e.cur = append(e.cur, k)
	e.sorted = false
	e.n++
}

// runMin is the fewest repeats of a value addN counts in a run (16
// bytes) rather than adding each (a byte or so once packed).
const runMin = 64

// addN adds k count times.
func (e *Exact) addN(k uint64, count int64) {
	if count < runMin {
		for range count {
			e.add(k)
		}
		return
	}
	if i := len(e.runs) - 1; i >= 0 && !e.runsSorted && e.runs[i].key == k {
		e.runs[i].count += count
	} else {
		e.runs = append(e.runs, run{k, count})
		e.runsSorted = false
	}
	e.n += count
}

// Len is how many values it holds.
func (e *Exact) Len() int64 { return e.n }

// each hands f every key held apart from the runs' repeats.
func (e *Exact) each(f func(uint64)) {
	for i := range e.packed {
		e.packed[i].each(f)
	}
	for _, k := range e.cur {
		f(k)
	}
}

// Merge adds o's values.
func (e *Exact) Merge(o *Exact) {
	o.each(e.add)
	for _, r := range o.runs {
		e.runs = append(e.runs, r)
		e.n += r.count
		e.runsSorted = false
	}
}

func (e *Exact) sortAll() {
	if !e.sorted {
		slices.Sort(e.cur)
		e.sorted = true
	}
	if !e.runsSorted {
		slices.SortFunc(e.runs, func(a, b run) int {
			switch {
			case a.key < b.key:
				return -1
			case a.key > b.key:
				return 1
			}
			return 0
		})
		// Same keys merged, so that a run at the end can grow again.
		merged := e.runs[:0]
		for _, r := range e.runs {
			if k := len(merged); k > 0 && merged[k-1].key == r.key {
				merged[k-1].count += r.count
				continue
			}
			merged = append(merged, r)
		}
		e.runs = merged
		e.runsAtMost = e.runsAtMost[:0]
		var sum int64
		for _, r := range e.runs {
			sum += r.count
			e.runsAtMost = append(e.runsAtMost, sum)
		}
		e.runsSorted = true
	}
}

// atMost counts the keys at or below k (sorted first).
func (e *Exact) atMost(k uint64) int64 {
	var n int64
	for i := range e.packed {
		n += e.packed[i].atMost(k)
	}
	i, found := slices.BinarySearch(e.cur, k)
	for found && i < len(e.cur) && e.cur[i] == k {
		i++
	}
	n += int64(i)
	i, found = slices.BinarySearchFunc(e.runs, k, func(r run, k uint64) int {
		switch {
		case r.key < k:
			return -1
		case r.key > k:
			return 1
		}
		return 0
	})
	if found {
		i++
	}
	if i > 0 {
		n += e.runsAtMost[i-1]
	}
	return n
}

// rank is the smallest key with at least r keys at or below it (r ≥ 1,
// r ≤ Len).
func (e *Exact) rank(r int64) uint64 { return exactSet{e}.rank(r) }

// exactSet is the union of several Exacts (of the same kind of value),
// queried without copying them together.
type exactSet []*Exact

func (s exactSet) len() int64 {
	var n int64
	for _, e := range s {
		n += e.n
	}
	return n
}

func (s exactSet) atMost(k uint64) int64 {
	var n int64
	for _, e := range s {
		e.sortAll()
		n += e.atMost(k)
	}
	return n
}

func (s exactSet) rank(r int64) uint64 {
	for _, e := range s {
		e.sortAll()
	}
	lo, hi := uint64(0), uint64(math.MaxUint64) // the answer is in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		if s.atMost(mid) >= r {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// secondsKey orders float64s as sortNaNFirst does (NaN first, -0 just
// before +0, which compare equal there and give the same quantile).
func secondsKey(v float64) uint64 {
	if math.IsNaN(v) {
		return 0
	}
	b := math.Float64bits(v)
	if b>>63 == 1 {
		return ^b
	}
	return b | 1<<63
}

func secondsOf(k uint64) float64 {
	if k == 0 {
		return math.NaN()
	}
	if k>>63 == 1 {
		return math.Float64frombits(k &^ (1 << 63))
	}
	return math.Float64frombits(^k)
}

// AddSeconds adds a value in seconds.
func (e *Exact) AddSeconds(v float64) { e.add(secondsKey(v)) }

// Seconds is the smallest value (added with AddSeconds) with at least r
// values at or below it, 1 ≤ r ≤ Len.
func (e *Exact) Seconds(r int64) float64 { return secondsOf(e.rank(r)) }

// AtMostSeconds counts the values (added with AddSeconds) at or below v;
// NaN is at or below nothing.
func (e *Exact) AtMostSeconds(v float64) int64 {
	e.sortAll()
	if math.IsNaN(v) {
		return 0
	}
	return e.atMost(secondsKey(v)) - e.atMost(0)
}

// AddDuration adds a duration (not to be mixed with AddSeconds in one
// Exact).
func (e *Exact) AddDuration(d time.Duration) { e.add(uint64(d) ^ 1<<63) }

// AddDurationN adds a duration count times.
func (e *Exact) AddDurationN(d time.Duration, count int64) { e.addN(uint64(d)^1<<63, count) }

// Duration is Seconds for values added with AddDuration.
func (e *Exact) Duration(r int64) time.Duration { return time.Duration(e.rank(r) ^ 1<<63) }

// DurationQuantile is the smallest duration (added with AddDuration to
// any of the sets) with at least q of them at or below it, and how many
// there are (0 and 0 for none).
func DurationQuantile(q float64, sets ...*Exact) (time.Duration, int64) {
	s := exactSet(sets)
	n := s.len()
	if n == 0 {
		return 0, 0
	}
	r := min(max(int64(math.Ceil(q*float64(n))), 1), n)
	return time.Duration(s.rank(r) ^ 1<<63), n
}
