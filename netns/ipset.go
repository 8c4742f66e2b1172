package netns

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"

	"github.com/proxysim/proxysim/sim/ipvs"
)

// ErrNoIPSet says the ipset tool is not installed.
var ErrNoIPSet = errors.New("ipset is not installed (Debian's and Ubuntu's package ipset has it): " + DoctorHint)

// LookIPSet finds the ipset binary in PATH or /usr/sbin.
func LookIPSet() (string, error) {
	if p, err := exec.LookPath("ipset"); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		if st, err := os.Stat(dir + "/ipset"); err == nil && st.Mode()&0o111 != 0 {
			return dir + "/ipset", nil
		}
	}
	return "", ErrNoIPSet
}

// IPSets are the real ipsets of one namespace, programmed with the ipset
// tool as kube-proxy's utilipset does (pkg/util/ipset: create and add
// with -exist, del, list), its writes batched into one restore (see
// CreateSet). It implements sim/ipvs.IPSetHandle.
type IPSets struct {
	ns      *Namespace
	bin     string
	mu      sync.Mutex
	pending []string
}

var _ ipvs.IPSetHandle = (*IPSets)(nil)

// IPSets returns n's ipsets.
func (n *Namespace) IPSets() (*IPSets, error) {
	bin, err := LookIPSet()
	if err != nil {
		return nil, err
	}
	return &IPSets{ns: n, bin: bin}, nil
}

// runTool executes bin with args inside the namespace (runIn), and
// returns stdout; a failure carries stderr.
func (n *Namespace) runTool(bin, stdin string, env []string, args ...string) (string, error) {
	out, stderr, err := n.runIn(bin, args, stdin, env...)
	if err != nil {
		return out, fmt.Errorf("%s %s: %s", bin, strings.Join(args, " "), failure(stderr, err))
	}
	return out, nil
}

func (s *IPSets) run(args ...string) (string, error) { return s.ns.runTool(s.bin, "", nil, args...) }

// CreateSet queues `create NAME TYPE family F` (bitmap:port with range
// 0-65535), as kube-proxy creates its sets; the set's comment, which no
// match reads, is not written. Writes are queued and applied together by
// Flush (one `ipset -exist restore`), which every read runs first: each
// process is slow under a VM's emulation.
func (s *IPSets) CreateSet(set ipvs.IPSet) error {
	line := "create " + set.Name + " " + string(set.Type)
	if set.Type == ipvs.BitmapPort {
		line += " range 0-65535"
	} else {
		line += " family " + set.Family
	}
	s.queue(line)
	return nil
}

// AddEntry queues `add SET ENTRY` (with -exist).
func (s *IPSets) AddEntry(set, entry string) error {
	s.queue("add " + set + " " + entry)
	return nil
}

// DelEntry queues `del SET ENTRY`.
func (s *IPSets) DelEntry(set, entry string) error {
	s.queue("del " + set + " " + entry)
	return nil
}

func (s *IPSets) queue(line string) {
	s.mu.Lock()
	s.pending = append(s.pending, line)
	s.mu.Unlock()
}

// Flush applies the queued writes with one `ipset -exist restore`: all of
// them, or an error naming the line the kernel refused.
func (s *IPSets) Flush() error {
	s.mu.Lock()
	lines := s.pending
	s.pending = nil
	s.mu.Unlock()
	if len(lines) == 0 {
		return nil
	}
	_, err := s.ns.runTool(s.bin, strings.Join(lines, "\n")+"\n", nil, "-exist", "restore")
	return err
}

// Sets reads every set's create line (`ipset save`), sorted by name.
func (s *IPSets) Sets() ([]ipvs.IPSet, error) {
	saved, err := s.saved()
	if err != nil {
		return nil, err
	}
	return saved.Sets()
}

// saved reads every set and member with one `ipset save`.
func (s *IPSets) saved() (savedSets, error) {
	if err := s.Flush(); err != nil {
		return savedSets{}, err
	}
	text, err := s.run("save")
	if err != nil {
		return savedSets{}, err
	}
	out := savedSets{entries: map[string][]string{}}
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 3 && f[0] == "create":
			set := ipvs.IPSet{Name: f[1], Type: ipvs.IPSetType(f[2]), Family: "inet"}
			for i := 3; i+1 < len(f); i++ {
				if f[i] == "family" {
					set.Family = f[i+1]
				}
			}
			out.sets = append(out.sets, set)
		case len(f) >= 3 && f[0] == "add":
			out.entries[f[1]] = append(out.entries[f[1]], f[2])
		}
	}
	sort.Slice(out.sets, func(i, j int) bool { return out.sets[i].Name < out.sets[j].Name })
	return out, nil
}

// savedSets is one `ipset save`, read back through the handle's reads
// (ipvs.SaveIPSets takes it); it takes no writes.
type savedSets struct {
	sets    []ipvs.IPSet
	entries map[string][]string
}

func (s savedSets) Sets() ([]ipvs.IPSet, error)               { return s.sets, nil }
func (s savedSets) ListEntries(name string) ([]string, error) { return s.entries[name], nil }
func (savedSets) CreateSet(ipvs.IPSet) error                  { return errReadOnly }
func (savedSets) AddEntry(string, string) error               { return errReadOnly }
func (savedSets) DelEntry(string, string) error               { return errReadOnly }

var errReadOnly = errors.New("a saved copy of the ipsets takes no writes")

// ListEntries reads a set's members as `ipset save NAME` prints them.
func (s *IPSets) ListEntries(name string) ([]string, error) {
	if err := s.Flush(); err != nil {
		return nil, err
	}
	text, err := s.run("save", name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[0] == "add" && f[1] == name {
			out = append(out, f[2])
		}
	}
	return out, nil
}
