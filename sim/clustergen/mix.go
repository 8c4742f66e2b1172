package clustergen

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Error is one problem with a spec: Field is the spec field's name as a
// scenario writes it (services, types, podCIDR), and for a Mix's value the
// field, a dot and the value (types.Foo).
type Error struct {
	Field, Msg string
}

// Errors are every problem a spec has.
type Errors []Error

func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Field + ": " + e.Msg
	}
	return strings.Join(parts, "; ")
}

func (es *Errors) add(field, format string, args ...any) {
	*es = append(*es, Error{Field: field, Msg: fmt.Sprintf(format, args...)})
}

// maxShares bounds a Mix's total, so that counts never overflow.
const maxShares = 1 << 30

func orDefault[K cmp.Ordered](m Mix[K], def K) Mix[K] {
	if len(m) == 0 {
		return Mix[K]{def: 1}
	}
	return m
}

// checkMix reports shares that are negative or add up to nothing, and
// values bad says are wrong.
func checkMix[K cmp.Ordered](errs *Errors, field string, m Mix[K], bad func(K) string) {
	total := 0
	for _, k := range slices.Sorted(maps.Keys(m)) {
		at := fmt.Sprintf("%s.%v", field, k)
		if msg := bad(k); msg != "" {
			errs.add(at, "%s, got %v", msg, k)
		}
		if m[k] < 0 || m[k] > maxShares {
			errs.add(at, "want a share from 0 to %d, got %d", maxShares, m[k])
			continue
		}
		total += m[k]
	}
	if total == 0 {
		errs.add(field, "every share is 0: give at least one a share")
	} else if total > maxShares {
		errs.add(field, "shares add up to %d: at most %d", total, maxShares)
	}
}

// oneOf accepts the values given.
func oneOf[K cmp.Ordered](values ...K) func(K) string {
	return func(k K) string {
		if slices.Contains(values, k) {
			return ""
		}
		words := make([]string, len(values))
		for i, v := range values {
			words[i] = fmt.Sprint(v)
		}
		return "want " + strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
	}
}

// counts splits n items over a mix's values exactly: each value gets its
// share of n rounded down, and what rounding left goes one each to the
// values with the largest remainders (ties to the smaller value), so the
// counts add up to n and none is off its share by a whole item (Hamilton's
// largest-remainder method).
func counts[K cmp.Ordered](m Mix[K], n int) ([]K, []int) {
	keys := slices.Sorted(maps.Keys(m))
	total := int64(0)
	for _, k := range keys {
		total += int64(m[k])
	}
	out := make([]int, len(keys))
	rem := make([]int64, len(keys))
	given := 0
	for i, k := range keys {
		q := int64(n) * int64(m[k])
		out[i], rem[i] = int(q/total), q%total
		given += out[i]
	}
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rem[b], rem[a]) })
	for j := 0; given < n; j++ {
		out[order[j]]++
		given++
	}
	return keys, out
}

// spread gives each of n items a value of the mix: exactly counts(m, n)
// of each, in an order the random stream shuffles.
func spread[K cmp.Ordered](m Mix[K], n int, r *rand.Rand) []K {
	keys, cs := counts(m, n)
	out := make([]K, 0, n)
	for i, k := range keys {
		for range cs[i] {
			out = append(out, k)
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// validateName checks a namespace name as the API server does.
func validateName(ns string) []string { return validation.IsDNS1123Label(ns) }

// ipPool hands out the addresses of an IPv4 CIDR in order, its first
// (network) and last (broadcast) aside.
type ipPool struct {
	prefix netip.Prefix
	base   uint32
	size   uint64 // addresses it can hand out
	next   uint32 // offset of the next one
}

func newIPPool(cidr string) (ipPool, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return ipPool{}, fmt.Errorf("want a CIDR such as 10.96.0.0/12, got %q", cidr)
	}
	if !p.Addr().Is4() {
		return ipPool{}, fmt.Errorf("want an IPv4 CIDR, got %s (generated clusters are IPv4)", cidr)
	}
	if p.Masked() != p {
		return ipPool{}, fmt.Errorf("%s has host bits set: did you mean %s?", cidr, p.Masked())
	}
	a := p.Addr().As4()
	pool := ipPool{prefix: p, base: binary.BigEndian.Uint32(a[:]), next: 1}
	if p.Bits() <= 30 {
		pool.size = uint64(1)<<(32-p.Bits()) - 2
	}
	return pool, nil
}

func (p ipPool) overlaps(q ipPool) bool { return p.prefix.Overlaps(q.prefix) }

// take hands out the next address; plan checked there are enough.
func (p *ipPool) take() string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], p.base+p.next)
	p.next++
	return netip.AddrFrom4(b).String()
}

// parsePortRange reads "FIRST-LAST".
func parsePortRange(s string) (first, last int, err error) {
	a, b, ok := strings.Cut(s, "-")
	first, err1 := strconv.Atoi(a)
	last, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || first < 1 || last > 65535 || first > last {
		return 0, 0, fmt.Errorf("want FIRST-LAST within 1-65535, such as 30000-32767, got %q", s)
	}
	return first, last, nil
}
