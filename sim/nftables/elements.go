package nftables

import (
	"context"
	"sort"
	"strings"

	"sigs.k8s.io/knftables"
)

// elements is what the proxier believes one set or map holds, so that a
// sync writes element diffs instead of flushing: kube-proxy's
// nftElementStorage (pkg/proxy/nftables/proxier.go).
type elements struct {
	kind, name string // "set" or "map", and its name
	// have maps an element's key to its value, each joined with " . ".
	have map[string]string
	// leftover are the keys not ensured since the last cleanup.
	leftover map[string]bool
}

func newElements(kind, name string) *elements {
	return &elements{kind: kind, name: name, have: map[string]string{}, leftover: map[string]bool{}}
}

func join(parts []string) string { return strings.Join(parts, " . ") }

// readOrReset, on a full sync, reads the container's elements back from
// the dataplane; if they cannot be read (other than because the container
// does not exist yet) it flushes the container in tx and starts empty.
func (s *elements) readOrReset(ctx context.Context, tx *txn, nft knftables.Interface) {
	clear(s.have)
	defer s.resetLeftovers()
	got, err := nft.ListElements(ctx, s.kind, s.name)
	tx.work.ElementListings++
	tx.work.ElementsListed += len(got)
	if err != nil && !knftables.IsNotFound(err) {
		if s.kind == "set" {
			tx.Flush(&knftables.Set{Name: s.name})
		} else {
			tx.Flush(&knftables.Map{Name: s.name})
		}
		return
	}
	for _, e := range got {
		s.have[join(e.Key)] = join(e.Value)
	}
}

func (s *elements) resetLeftovers() {
	clear(s.leftover)
	for k := range s.have {
		s.leftover[k] = true
	}
}

// ensure makes e present: added when new, deleted and re-added when its
// value changed, nothing when it is there already.
func (s *elements) ensure(tx *txn, e *knftables.Element) {
	k, v := join(e.Key), join(e.Value)
	old, ok := s.have[k]
	switch {
	case !ok:
		tx.Add(e)
		s.have[k] = v
	case old != v:
		tx.Delete(e)
		tx.Add(e)
		s.have[k] = v
		delete(s.leftover, k)
	default:
		delete(s.leftover, k)
	}
}

// deleteLeftovers deletes the elements no service ensured this sync, in
// key order (kube-proxy walks a Go set).
func (s *elements) deleteLeftovers(tx *txn) {
	keys := make([]string, 0, len(s.leftover))
	for k := range s.leftover {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e := &knftables.Element{Key: strings.Split(k, " . ")}
		if s.kind == "set" {
			e.Set = s.name
		} else {
			e.Map = s.name
		}
		tx.Delete(e)
		delete(s.have, k)
	}
	s.resetLeftovers()
}

// SortElements sorts each run of `add element` lines of a dump. The Fake
// lists a set's elements in the order they were added, which depends on
// the history of syncs; sorted, two tables with the same contents print
// the same.
func SortElements(dump string) string {
	lines := strings.Split(dump, "\n")
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && strings.HasPrefix(lines[j], "add element ") {
			j++
		}
		if j > i {
			sort.Strings(lines[i:j])
			i = j
		} else {
			i++
		}
	}
	return strings.Join(lines, "\n")
}
