package migrate

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/proxysim/proxysim/scenarios"
)

// Story is a migration told with its expected verdict: a cluster, its
// kube-proxy configuration, the target, and what must come out: the exit
// code, each node's readiness, and for each Service "unchanged" or the
// differences it must show (entry, client and the rule behind each).
// The library's stories (scenarios/migrate/stories) each have a failing
// twin that claims what a broken comparison would say.
type Story struct {
	File        string
	Name        string   `yaml:"name"`
	Description string   `yaml:"description"`
	Cluster     string   `yaml:"cluster"`
	Config      string   `yaml:"config"`
	To          string   `yaml:"to"`
	Set         []string `yaml:"set"`
	Expect      struct {
		Exit     *int                    `yaml:"exit"`
		Nodes    map[string]string       `yaml:"nodes"`
		Services map[string]StoryService `yaml:"services"`
	} `yaml:"expect"`

	lines map[string]int // expect.<path> -> line
}

// StoryService is one Service's expected verdict: unchanged: true, or the
// differences (each entry, client and rule id; after, if given, must be
// the target's outcome as the report prints it).
type StoryService struct {
	Unchanged   bool              `yaml:"unchanged"`
	Differences []StoryDifference `yaml:"differences"`
}

// StoryDifference is one expected difference.
type StoryDifference struct {
	Port   string `yaml:"port"`
	Entry  string `yaml:"entry"`
	Client string `yaml:"client"`
	Rule   string `yaml:"rule"`
	After  string `yaml:"after"`
}

// LoadStory reads a story file; problems name file:line: field.
func LoadStory(file string) (*Story, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	st := &Story{File: file, lines: map[string]int{}}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(st); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(doc.Content) > 0 {
		walkLines(doc.Content[0], "", st.lines)
	}
	var ps []string
	bad := func(path, format string, args ...any) {
		ps = append(ps, fmt.Sprintf("%s:%d: %s: %s", file, st.line(path), path, fmt.Sprintf(format, args...)))
	}
	if st.Name == "" {
		bad("name", "required")
	}
	if st.Cluster == "" || st.Config == "" {
		bad("cluster", "cluster and config are required: the dump and the kube-proxy configuration, relative to the story")
	}
	if !slices.Contains(Modes, st.To) {
		bad("to", "want %s, got %q", strings.Join(Modes, ", "), st.To)
	}
	if st.Expect.Exit == nil {
		bad("expect.exit", "required: %d, %d or %d", ExitUnchanged, ExitDifferences, ExitNodes)
	}
	for name, v := range st.Expect.Nodes {
		if v != "ready" && v != "not ready" {
			bad("expect.nodes."+name, "want ready or not ready, got %q", v)
		}
	}
	for name, s := range st.Expect.Services {
		path := "expect.services." + name
		if s.Unchanged == (len(s.Differences) > 0) {
			bad(path, "give unchanged: true, or the differences")
		}
		for i, d := range s.Differences {
			if d.Entry == "" || d.Client == "" || d.Rule == "" {
				bad(fmt.Sprintf("%s.differences[%d]", path, i), "entry, client and rule are required")
			}
		}
	}
	if len(ps) > 0 {
		slices.Sort(ps)
		return nil, fmt.Errorf("%s", strings.Join(ps, "\n"))
	}
	return st, nil
}

func walkLines(n *yaml.Node, path string, lines map[string]int) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			lines[p] = n.Content[i].Line
			walkLines(n.Content[i+1], p, lines)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			lines[p] = c.Line
			walkLines(c, p, lines)
		}
	}
}

func (st *Story) line(path string) int {
	for p := path; p != ""; {
		if l, ok := st.lines[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 1
}

// Options are the comparison the story asks for.
func (st *Story) Options() (Options, error) {
	dir := filepath.Dir(st.File)
	o := Options{Cluster: filepath.Join(dir, st.Cluster), Config: filepath.Join(dir, st.Config), To: st.To}
	for _, s := range st.Set {
		path, value, ok := strings.Cut(s, "=")
		if !ok {
			return o, fmt.Errorf("%s:%d: set: want proxy.FIELD=VALUE, got %q", st.File, st.line("set"), s)
		}
		o.Set = append(o.Set, scenarios.Setting{Path: path, Value: value})
	}
	return o, nil
}

// StoryFailure is an expectation of the story the report does not meet.
type StoryFailure struct {
	Line int
	What string
}

func (f StoryFailure) String() string { return fmt.Sprintf("line %d: %s", f.Line, f.What) }

// Check holds the report to the story's expectations. Every Service of
// the report must be listed.
func (st *Story) Check(r *Report) []StoryFailure {
	var out []StoryFailure
	fail := func(path, format string, args ...any) {
		out = append(out, StoryFailure{Line: st.line(path), What: fmt.Sprintf(format, args...)})
	}
	if st.Expect.Exit != nil && *st.Expect.Exit != r.Exit {
		fail("expect.exit", "exit %d, want %d (%s)", r.Exit, *st.Expect.Exit, r.Summary)
	}
	for _, n := range r.Nodes {
		want, ok := st.Expect.Nodes[n.Node]
		if !ok {
			continue
		}
		got := "ready"
		if !n.Ready {
			got = "not ready"
		}
		if got != want {
			fail("expect.nodes."+n.Node, "node %s is %s, want %s: %s", n.Node, got, want, n.Why)
		}
	}
	seen := map[string]bool{}
	for _, s := range r.Services {
		seen[s.Service] = true
		want, ok := st.Expect.Services[s.Service]
		path := "expect.services." + s.Service
		if !ok {
			fail("expect.services", "Service %s is not in the story (it is %s)", s.Service, verdict(s))
			continue
		}
		if want.Unchanged {
			if !s.Unchanged {
				fail(path, "%s changes: %s", s.Service, diffList(s.Differences))
			}
			continue
		}
		used := make([]bool, len(s.Differences))
		for i, w := range want.Differences {
			found := false
			for j, d := range s.Differences {
				if !used[j] && matches(w, d) {
					used[j], found = true, true
					break
				}
			}
			if !found {
				fail(fmt.Sprintf("%s.differences[%d]", path, i), "no difference %s/%s from %s by rule %s%s; the report has: %s", w.Port, w.Entry, w.Client, w.Rule, afterText(w.After), diffList(s.Differences))
			}
		}
		for j, d := range s.Differences {
			if !used[j] {
				fail(path, "a difference the story does not list: %s", diffList([]Difference{d}))
			}
		}
	}
	for _, name := range sortedKeys(st.Expect.Services) {
		if !seen[name] {
			fail("expect.services."+name, "no Service %s in the cluster", name)
		}
	}
	slices.SortStableFunc(out, func(a, b StoryFailure) int { return a.Line - b.Line })
	return out
}

func matches(w StoryDifference, d Difference) bool {
	return (w.Port == "" || w.Port == d.Port) && w.Entry == d.Entry && w.Client == d.Client && w.Rule == d.Rule.ID && (w.After == "" || w.After == d.After)
}

func afterText(a string) string {
	if a == "" {
		return ""
	}
	return " ending " + a
}

func verdict(s ServiceReport) string {
	if s.Unchanged {
		return "unchanged"
	}
	return "changed: " + diffList(s.Differences)
}

func diffList(ds []Difference) string {
	if len(ds) == 0 {
		return "none"
	}
	var parts []string
	for _, d := range ds {
		parts = append(parts, fmt.Sprintf("[%s/%s from %s: %s -> %s (%s)]", d.Port, d.Entry, d.Client, d.Before, d.After, d.Rule.ID))
	}
	return strings.Join(parts, " ")
}
