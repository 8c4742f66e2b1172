package scenarios

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/proxysim/proxysim/sim/ipvs"
	"github.com/proxysim/proxysim/sim/runner"
)

// Load reads and validates a scenario file from disk. Every file it names
// must be a regular file inside the scenario's folder (after symlinks).
func Load(file string) (*Scenario, error) {
	dir := filepath.Dir(file)
	base := filepath.Base(file)
	// The scenario named on the command line may itself be a symlink; its
	// folder is where it really lives.
	if real, err := filepath.EvalSymlinks(file); err == nil {
		dir, base = filepath.Dir(real), filepath.Base(real)
	}
	f := osFolder(dir)
	data, err := f.read(base)
	if err != nil {
		return nil, Problems{{File: file, Msg: "cannot read the scenario: " + err.Error()}}
	}
	return parse(file, data, f, base)
}

// LoadFS reads a scenario from a file system (the embedded library).
func LoadFS(fsys fs.FS, name string) (*Scenario, error) {
	f := fsFolder(fsys, path.Dir(name))
	data, err := f.read(path.Base(name))
	if err != nil {
		return nil, Problems{{File: name, Msg: "cannot read the scenario: " + err.Error()}}
	}
	return parse(name, data, f, path.Base(name))
}

// Parse validates a scenario held in memory. dir, if not nil, is the
// scenario's folder: the files it names are read from there. --update cannot
// rewrite a parsed scenario.
func Parse(file string, data []byte, dir fs.FS) (*Scenario, error) {
	if dir == nil {
		dir = noFiles{}
	}
	return parse(file, data, fsFolder(dir, "."), "")
}

var yamlLineRE = regexp.MustCompile(`line (\d+)(?::(\d+))?`)

func parse(file string, data []byte, dir folder, base string) (*Scenario, error) {
	d := &decoder{file: file}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, Problems{{File: file, Line: 1, Column: 1, Msg: "empty scenario file"}}
		}
		line, col := 1, 1
		if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
			if m[2] != "" {
				col, _ = strconv.Atoi(m[2])
			}
			// yaml.v3 counts lines from 0 in parser errors (and names the
			// line where the unfinished construct began), from 1 in scanner
			// errors.
			if strings.Contains(err.Error(), "did not find expected") {
				line++
			}
		}
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		return nil, Problems{{File: file, Line: line, Column: col, Path: "(syntax)", Msg: msg}}
	}
	if p := secondDocument(dec, file); p != nil {
		d.problems = append(d.problems, *p)
	}
	s := &Scenario{File: file, Dir: filepath.Dir(file), source: data, folder: dir, base: base}
	d.decode(&doc, "", reflectValue(s))
	// Validate even a file that did not decode cleanly, so that every
	// problem is reported at once.
	d.validate(s)
	if len(d.problems) > 0 {
		sort.SliceStable(d.problems, func(i, j int) bool {
			a, b := d.problems[i], d.problems[j]
			if a.File != b.File {
				return a.File == file
			}
			if a.Line != b.Line {
				return lineKey(a.Line) < lineKey(b.Line)
			}
			return a.Column < b.Column
		})
		return nil, d.problems
	}
	return s, nil
}

// lineKey sorts problems without a position last.
func lineKey(line int) int {
	if line == 0 {
		return int(^uint(0) >> 1)
	}
	return line
}

// Kinds of objects a scenario may name.
var supportedKinds = map[string]bool{"Service": true, "EndpointSlice": true}

// SupportedSchedulers are the IPVS schedulers the fake dataplane models.
var SupportedSchedulers = map[string]bool{"rr": true, "wrr": true, "sh": true}

func (d *decoder) validate(s *Scenario) {
	if strings.TrimSpace(s.Name) == "" {
		d.addAt(s.Src.At("name"), "required: a scenario name")
	}
	if s.Proxy.Src.Line == 0 {
		if !d.has("proxy") {
			d.addAt(s.Src.At("proxy"), "required: the proxy under test (at least its version)")
		}
	} else {
		d.validateProxy(&s.Proxy)
	}

	known := map[string]bool{}
	// state is every object as it is at this point of the timeline, so that
	// patches and churn are checked against what they will change.
	state := map[string]runtime.Object{}
	for i := range s.Objects {
		for _, o := range d.objectsOf(s, &s.Objects[i], fmt.Sprintf("objects[%d]", i)) {
			if known[o.Key] {
				d.addAt(o.Pos, "%s is defined twice", o.Key)
			}
			known[o.Key] = true
			state[o.Key] = o.Obj
			s.Initial = append(s.Initial, o)
		}
	}
	if len(s.Timeline) == 0 {
		d.addAt(s.Src.At("timeline"), "required: at least one step")
	}
	var last Duration
	conns := map[string]bool{}  // open now
	opened := map[string]bool{} // ever opened
	for i := range s.Timeline {
		st := &s.Timeline[i]
		p := fmt.Sprintf("timeline[%d]", i)
		if st.At == nil {
			d.addAt(st.Src.At("at"), "required: the step's virtual instant, such as 1.5s")
		} else {
			if *st.At < last {
				d.addAt(st.Src.At("at"), "step at %v comes before the previous step at %v: steps must be in time order", st.At, last)
			}
			last = *st.At
		}
		actions := 0
		for _, on := range []bool{st.Apply != nil, st.Update != nil, st.Patch != nil, st.Churn != nil, st.Delete != nil, st.Restart, st.Fault != nil, st.Connect != nil, st.Close != nil} {
			if on {
				actions++
			}
		}
		if actions > 1 {
			d.addAt(Pos{st.Src.Line, st.Src.Column, p}, "a step takes one action (apply, update, patch, churn, delete, restart, fault, connect or close); split it into steps at the same instant")
		}
		if actions == 0 && st.Expect == nil && st.Note == "" {
			d.addAt(Pos{st.Src.Line, st.Src.Column, p}, "empty step: give an action, an expect or a note")
		}
		for _, which := range []struct {
			n      *yaml.Node
			key    string
			update bool
		}{{st.Apply, "apply", false}, {st.Update, "update", true}} {
			if which.n == nil {
				continue
			}
			for _, o := range d.objectsOf(s, which.n, join(p, which.key)) {
				if which.update && !known[o.Key] {
					d.addAt(o.Pos, "update of %s, which does not exist at this point (use apply to create)", o.Key)
				}
				known[o.Key] = true
				state[o.Key] = o.Obj
				st.objects = append(st.objects, o)
			}
		}
		if pt := st.Patch; pt != nil {
			d.validateRef(pt.Kind, pt.Namespace, pt.Name, pt.Src, known)
			switch {
			case pt.Merge == nil && pt.Endpoint == "":
				d.addAt(pt.Src.At("merge"), "a patch needs merge (a strategic merge patch) or endpoint and conditions")
			case pt.Merge != nil && pt.Endpoint != "":
				d.addAt(pt.Src.At("endpoint"), "give merge or endpoint, not both")
			case pt.Endpoint != "":
				if pt.Kind != "EndpointSlice" {
					d.addAt(pt.Src.At("endpoint"), "endpoint patches apply to EndpointSlices, not %s", pt.Kind)
				}
				if net.ParseIP(pt.Endpoint) == nil {
					d.addAt(pt.Src.At("endpoint"), "%q is not an IP address", pt.Endpoint)
				}
				if pt.Conditions == nil {
					d.addAt(pt.Src.At("conditions"), "required: the conditions to set")
				}
				if sl, ok := state[KeyOf(pt.Kind, pt.Namespace, pt.Name)].(*discovery.EndpointSlice); ok && !hasEndpoint(sl, pt.Endpoint) {
					d.addAt(pt.Src.At("endpoint"), "%s has no endpoint %s at this point", KeyOf(pt.Kind, pt.Namespace, pt.Name), pt.Endpoint)
				}
			default:
				d.validateMerge(pt, p, state)
			}
		}
		if c := st.Churn; c != nil {
			d.validateRef("EndpointSlice", c.Namespace, c.Name, c.Src, known)
			if net.ParseIP(c.Endpoint) == nil {
				d.addAt(c.Src.At("endpoint"), "%q is not an IP address", c.Endpoint)
			} else if sl, ok := state[KeyOf("EndpointSlice", c.Namespace, c.Name)].(*discovery.EndpointSlice); ok && !hasEndpoint(sl, c.Endpoint) {
				d.addAt(c.Src.At("endpoint"), "%s has no endpoint %s at this point", KeyOf("EndpointSlice", c.Namespace, c.Name), c.Endpoint)
			}
			if c.Count < 1 {
				d.addAt(c.Src.At("count"), "want at least 1 change")
			}
			if c.Every <= 0 {
				d.addAt(c.Src.At("every"), "want a positive interval")
			} else if c.Count > 0 && st.At != nil {
				if _, ok := churnEnd(*st.At, c.Count, c.Every); !ok {
					d.addAt(c.Src.At("count"), "the last of %d changes every %v after %v would pass the largest instant proxysim can represent (%v)", c.Count, c.Every, st.At, time.Duration(math.MaxInt64))
				}
			}
		}
		if del := st.Delete; del != nil {
			d.validateRef(del.Kind, del.Namespace, del.Name, del.Src, known)
			delete(known, KeyOf(del.Kind, del.Namespace, del.Name))
			delete(state, KeyOf(del.Kind, del.Namespace, del.Name))
		}
		if f := st.Fault; f != nil {
			if f.DataplaneOps < 0 {
				d.addAt(f.Src.At("dataplaneOps"), "must not be negative")
			}
			if f.DataplaneOps == 0 && f.WatchBreak == nil {
				d.addAt(Pos{f.Src.Line, f.Src.Column, f.Src.Path}, "a fault needs dataplaneOps or watchBreak")
			}
		}
		if c := st.Connect; c != nil {
			if c.Name == "" {
				d.addAt(c.Src.At("name"), "required: a connection name")
			} else if conns[c.Name] {
				d.addAt(c.Src.At("name"), "connection %q is already open", c.Name)
			}
			conns[c.Name] = true
			opened[c.Name] = true
			for _, f := range []struct{ key, val string }{{"client", c.Client}, {"service", c.Service}} {
				if _, _, err := splitHostPort(f.val); err != nil {
					d.addAt(c.Src.At(f.key), "%v", err)
				}
			}
			switch c.Protocol {
			case "":
				c.Protocol = "TCP"
			case "TCP", "UDP":
			default:
				d.addAt(c.Src.At("protocol"), "want TCP or UDP, got %q", c.Protocol)
			}
		}
		if c := st.Close; c != nil {
			if !conns[c.Name] {
				d.addAt(c.Src.At("name"), "no open connection named %q", c.Name)
			}
			delete(conns, c.Name)
		}
		if e := st.Expect; e != nil {
			d.validateExpect(s, e, known, opened)
			if e.Within != nil && st.At != nil {
				if _, ok := addInstant(*st.At, *e.Within); !ok {
					d.addAt(e.Src.At("within"), "%v after %v would pass the largest instant proxysim can represent (%v)", e.Within, st.At, time.Duration(math.MaxInt64))
				}
			}
		}
	}
}

func splitHostPort(s string) (string, uint16, error) {
	h, p, err := net.SplitHostPort(s)
	if err != nil || net.ParseIP(h) == nil {
		return "", 0, fmt.Errorf("want ip:port, got %q", s)
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return "", 0, fmt.Errorf("want ip:port with a port 1-65535, got %q", s)
	}
	return h, uint16(n), nil
}

func (d *decoder) validateRef(kind, namespace, name string, src Src, known map[string]bool) {
	if !supportedKinds[kind] {
		d.addAt(src.At("kind"), "want Service or EndpointSlice, got %q", kind)
		return
	}
	if name == "" {
		d.addAt(src.At("name"), "required: the object's name")
		return
	}
	if key := KeyOf(kind, namespace, name); !known[key] {
		d.addAt(src.At("name"), "no %s at this point in the timeline", key)
	}
}

func (d *decoder) validateProxy(p *Proxy) {
	switch p.Mode {
	case "", "ipvs":
		p.Mode = "ipvs"
	case "iptables", "nftables":
		d.addAt(p.Src.At("mode"), "mode %q is not modelled yet; use ipvs", p.Mode)
	default:
		d.addAt(p.Src.At("mode"), "unknown mode %q (want ipvs)", p.Mode)
	}
	if p.Version == "" {
		d.addAt(p.Src.At("version"), "required: the kube-proxy version, such as v1.33.0 (burst runner) or v1.34.0 (cooldown runner)")
	} else if _, err := runner.GenerationFor(p.Version); err != nil {
		d.addAt(p.Src.At("version"), "%v", err)
	}
	if p.SyncPeriod != nil && p.SyncPeriod.D() == 0 {
		d.addAt(p.Src.At("syncPeriod"), "must be positive")
	}
	if p.MinSyncPeriod != nil && p.SyncPeriod != nil && p.SyncPeriod.D() < p.MinSyncPeriod.D() {
		d.addAt(p.Src.At("syncPeriod"), "syncPeriod %v is shorter than minSyncPeriod %v", p.SyncPeriod, p.MinSyncPeriod)
	}
	for i, ip := range p.NodeIPs {
		if net.ParseIP(ip) == nil {
			d.addAt(Pos{p.Src.At("nodeIPs").Line, p.Src.At("nodeIPs").Column, fmt.Sprintf("proxy.nodeIPs[%d]", i)}, "%q is not an IP address", ip)
		}
	}
	if p.Kernel == "" {
		p.Kernel = "6.1.0"
	} else if _, err := ipvs.ParseKernelVersion(p.Kernel); err != nil {
		d.addAt(p.Src.At("kernel"), "%v", err)
	}
	if p.Scheduler == "" {
		p.Scheduler = ipvs.DefaultScheduler
	} else if !SupportedSchedulers[p.Scheduler] {
		d.addAt(p.Src.At("scheduler"), "scheduler %q is not modelled (want rr, wrr or sh)", p.Scheduler)
	}
	if p.NodeName == "" {
		p.NodeName = "node-a"
	}
}

func (d *decoder) validateExpect(s *Scenario, e *Expect, known, opened map[string]bool) {
	if sy := e.Syncs; sy != nil {
		d.validateWindow(sy.Between, sy.Src)
		d.validateCounts(sy.Src, map[string]*int{"count": sy.Count, "atLeast": sy.AtLeast, "atMost": sy.AtMost})
		if sy.Count == nil && sy.AtLeast == nil && sy.AtMost == nil && sy.At == nil {
			d.addAt(Pos{sy.Src.Line, sy.Src.Column, sy.Src.Path}, "say what to expect: count, atLeast, atMost or at")
		}
	}
	if c := e.DataplaneOps; c != nil {
		d.validateWindow(c.Between, c.Src)
		d.validateCounts(c.Src, map[string]*int{"count": c.Count, "atLeast": c.AtLeast, "atMost": c.AtMost})
		if c.Count == nil && c.AtLeast == nil && c.AtMost == nil {
			d.addAt(Pos{c.Src.Line, c.Src.Column, c.Src.Path}, "say what to expect: count, atLeast or atMost")
		}
	}
	if e.IPVS != nil && e.IPVSFile != "" {
		d.addAt(e.Src.At("ipvsFile"), "give ipvs or ipvsFile, not both")
	}
	if e.IPVSFile != "" {
		if err := s.folder.check(e.IPVSFile); err != nil {
			d.addAt(e.Src.At("ipvsFile"), "%v", err)
		}
	}
	for name := range e.Sysctls {
		if !knownSysctls[name] {
			d.addAt(e.Src.At("sysctls"), "unknown sysctl %q (known: %s)", name, strings.Join(sortedKeys(knownSysctls), ", "))
		}
	}
	if l := e.Latency; l != nil {
		if !known[l.Object] {
			d.addAt(l.Src.At("object"), "no object %q at this point (write \"Kind namespace/name\")", l.Object)
		}
		if l.Max == nil && l.Exact == nil {
			d.addAt(Pos{l.Src.Line, l.Src.Column, l.Src.Path}, "say max or exact")
		}
	}
	for _, name := range sortedConnNames(e.Connections) {
		c := e.Connections[name]
		if !opened[name] {
			d.addAt(e.Src.At("connections"), "no connection named %q has been opened", name)
		}
		if c.Server != "" {
			if _, _, err := splitHostPort(c.Server); err != nil {
				d.addAt(c.Src.At("server"), "%v", err)
			}
		}
	}
}

func sortedConnNames(m map[string]ConnExpect) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// validateCounts refuses negative counts: no count of events can be below 0.
func (d *decoder) validateCounts(src Src, counts map[string]*int) {
	for _, k := range []string{"count", "atLeast", "atMost"} {
		if v := counts[k]; v != nil && *v < 0 {
			d.addAt(src.At(k), "must not be negative, got %d", *v)
		}
	}
}

// addInstant adds two durations, reporting false when the sum overflows.
func addInstant(a, b Duration) (Duration, bool) {
	if b > 0 && a > Duration(math.MaxInt64)-b {
		return 0, false
	}
	return a + b, true
}

// churnEnd is the instant of a churn's last change.
func churnEnd(at Duration, count int, every Duration) (Duration, bool) {
	n := Duration(count - 1)
	if n > 0 && every > Duration(math.MaxInt64)/n {
		return 0, false
	}
	return addInstant(at, n*every)
}

func (d *decoder) validateWindow(between []Duration, src Src) {
	if len(between) != 0 && len(between) != 2 {
		d.addAt(src.At("between"), "want [from, to]")
	} else if len(between) == 2 && between[1] < between[0] {
		d.addAt(src.At("between"), "window ends (%v) before it starts (%v)", between[1], between[0])
	}
}

var knownSysctls = map[string]bool{
	ipvs.SysctlConntrack: true, ipvs.SysctlConnReuseMode: true, ipvs.SysctlExpireNodestConn: true,
	ipvs.SysctlExpireQuiescentTemplate: true, ipvs.SysctlIPForward: true, ipvs.SysctlArpIgnore: true,
	ipvs.SysctlArpAnnounce: true,
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// objectsOf decodes an objects entry: a manifest, a list of them, or
// {file: path} naming a YAML file (possibly several documents).
func (d *decoder) objectsOf(s *Scenario, n *yaml.Node, p string) []Object {
	if n.Kind == yaml.SequenceNode {
		var out []Object
		for i, c := range n.Content {
			out = append(out, d.objectsOf(s, c, fmt.Sprintf("%s[%d]", p, i))...)
		}
		return out
	}
	if n.Kind == yaml.MappingNode && len(n.Content) == 2 && n.Content[0].Value == "file" {
		rel := n.Content[1].Value
		data, err := s.folder.read(rel)
		if err != nil {
			d.add(n.Content[1], join(p, "file"), "%v", err)
			return nil
		}
		name := path.Join(path.Dir(filepath.ToSlash(s.File)), rel)
		if docs, ok := splitDocuments(data); ok {
			return d.decodeDocuments(name, docs)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		var out []Object
		for i := 0; ; i++ {
			var doc yaml.Node
			if err := dec.Decode(&doc); err != nil {
				if !errors.Is(err, io.EOF) {
					saved := d.file
					d.file = name
					d.add(nil, fmt.Sprintf("(document %d)", i), "%v", err)
					d.file = saved
				}
				break
			}
			if len(doc.Content) == 0 || doc.Content[0].Tag == "!!null" {
				continue
			}
			if o, ok := d.decodeManifest(name, &doc, fmt.Sprintf("(document %d)", i)); ok {
				out = append(out, o)
			}
		}
		return out
	}
	if o, ok := d.decodeManifest(d.file, n, p); ok {
		return []Object{o}
	}
	return nil
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// secondDocument reports a YAML document after the scenario's first: a
// scenario is one document, and a second one would otherwise be ignored
// silently.
func secondDocument(dec *yaml.Decoder, file string) *Problem {
	var next yaml.Node
	err := dec.Decode(&next)
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return &Problem{File: file, Line: 1, Column: 1, Path: "(syntax)", Msg: "after the first document: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	case len(next.Content) == 0 || next.Content[0].Tag == "!!null":
		return nil
	}
	return &Problem{File: file, Line: next.Content[0].Line, Column: next.Content[0].Column, Path: "(document 2)",
		Msg: "a scenario file holds one YAML document; a second one starts here (manifests with several documents go in a file: reference)"}
}

// validateMerge applies a merge patch to the object as it is at this point
// and checks the result as a manifest: unknown fields are located in the
// patch, and the patched object must pass the API server's rules.
func (d *decoder) validateMerge(pt *Patch, path string, state map[string]runtime.Object) {
	key := KeyOf(pt.Kind, pt.Namespace, pt.Name)
	cur, ok := state[key]
	if !ok {
		return // reported by validateRef
	}
	mp := join(join(path, "patch"), "merge")
	out, err := mergePatch(cur, pt.Merge)
	if err != nil {
		var pe *patchError
		if errors.As(err, &pe) && pe.Field != "" {
			d.add(findPath(pt.Merge, pe.Field), join(mp, pe.Field), "%s", pe.Msg)
		} else {
			d.add(pt.Merge, mp, "%v", err)
		}
		return
	}
	newKey, errs, _ := defaultAndValidate(out)
	if newKey != key {
		d.add(pt.Merge, mp, "a patch cannot rename %s (to %s)", key, newKey)
		return
	}
	for _, e := range errs {
		d.add(findPath(pt.Merge, e.Field), join(mp, e.Field), "%s (after the patch)", fieldMessage(e))
	}
	state[key] = out
}
