package fakes

import (
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/proxysim/proxysim/sim/ipvs"
)

// IPSets is an in-memory ipset for sim/ipvs: sets by name, each with its
// type and family, and members in their text form. As the ipset tool, it
// refuses a set created again with another type, an entry that does not
// fit its set, and the deletion of an entry that is not there.
type IPSets struct {
	mu   sync.Mutex
	sets map[string]*fakeSet
}

type fakeSet struct {
	set     ipvs.IPSet
	entries map[string]bool
}

var _ ipvs.IPSetHandle = (*IPSets)(nil)

// NewIPSets is a node without sets.
func NewIPSets() *IPSets { return &IPSets{sets: map[string]*fakeSet{}} }

func (f *IPSets) CreateSet(s ipvs.IPSet) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(s.Name) == 0 || len(s.Name) > 31 {
		return fmt.Errorf("ipset create %q: a set name has 1 to 31 characters", s.Name)
	}
	switch s.Type {
	case ipvs.HashIP, ipvs.HashIPPort, ipvs.HashIPPortIP, ipvs.HashIPPortNet, ipvs.BitmapPort:
	default:
		return fmt.Errorf("ipset create %s: unknown type %q", s.Name, s.Type)
	}
	if old := f.sets[s.Name]; old != nil {
		if old.set.Type != s.Type || (s.Type != ipvs.BitmapPort && old.set.Family != s.Family) {
			return fmt.Errorf("ipset create %s: set exists with a different type (%s %s)", s.Name, old.set.Type, old.set.Family)
		}
		return nil
	}
	f.sets[s.Name] = &fakeSet{set: s, entries: map[string]bool{}}
	return nil
}

func (f *IPSets) Sets() ([]ipvs.IPSet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]ipvs.IPSet, 0, len(f.sets))
	for _, s := range f.sets {
		out = append(out, s.set)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *IPSets) get(name string) (*fakeSet, error) {
	s := f.sets[name]
	if s == nil {
		return nil, fmt.Errorf("ipset %s: the set with the given name does not exist", name)
	}
	return s, nil
}

func (f *IPSets) ListEntries(name string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.get(name)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(s.entries))
	for e := range s.entries {
		out = append(out, e)
	}
	slices.Sort(out)
	return out, nil
}

// canonical is an entry as ipset stores it: addresses and networks in
// their canonical text.
func canonical(set ipvs.IPSet, entry string) (string, error) {
	e, err := ipvs.ParseIPSetEntry(set, entry)
	if err != nil {
		return "", err
	}
	return e.String(set.Type), nil
}

func (f *IPSets) AddEntry(name, entry string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.get(name)
	if err != nil {
		return err
	}
	c, err := canonical(s.set, entry)
	if err != nil {
		return err
	}
	s.entries[c] = true
	return nil
}

func (f *IPSets) DelEntry(name, entry string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.get(name)
	if err != nil {
		return err
	}
	c, err := canonical(s.set, entry)
	if err != nil {
		return err
	}
	if !s.entries[c] {
		return fmt.Errorf("ipset del %s %s: element is missing from set", name, entry)
	}
	delete(s.entries, c)
	return nil
}
