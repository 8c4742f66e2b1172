package scenarios

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/proxysim/proxysim/sim/runner"
)

// LoadOptions tune how a scenario is read.
type LoadOptions struct {
	// Strict refuses objects of kinds proxysim does not model in the
	// manifest files a scenario names (a cluster dump), which are
	// otherwise skipped, each with a warning; and a kube-proxy
	// configuration (proxy.config) with unknown or duplicated fields,
	// which kube-proxy, and otherwise proxysim, reads leniently, with a
	// warning for each.
	Strict bool
}

// Load reads and validates a scenario file from disk. Every file it names
// must be a regular file inside the scenario's folder (after symlinks).
func Load(file string) (*Scenario, error) { return LoadWith(file, LoadOptions{}) }

// LoadWith is Load with options.
func LoadWith(file string, o LoadOptions) (*Scenario, error) {
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
	return parse(file, data, f, base, o)
}

// LoadFS reads a scenario from a file system (the embedded library).
func LoadFS(fsys fs.FS, name string) (*Scenario, error) {
	f := fsFolder(fsys, path.Dir(name))
	data, err := f.read(path.Base(name))
	if err != nil {
		return nil, Problems{{File: name, Msg: "cannot read the scenario: " + err.Error()}}
	}
	return parse(name, data, f, path.Base(name), LoadOptions{})
}

// Parse validates a scenario held in memory. dir, if not nil, is the
// scenario's folder: the files it names are read from there. --update cannot
// rewrite a parsed scenario.
func Parse(file string, data []byte, dir fs.FS) (*Scenario, error) {
	if dir == nil {
		dir = noFiles{}
	}
	return parse(file, data, fsFolder(dir, "."), "", LoadOptions{})
}

var yamlLineRE = regexp.MustCompile(`line (\d+)(?::(\d+))?`)

func parse(file string, data []byte, dir folder, base string, o LoadOptions) (*Scenario, error) {
	return parseCut(file, data, dir, base, len(data) >= inlineFastMin, o)
}

// parseCut parses a scenario, cutting its inline objects out when cut is set.
func parseCut(file string, data []byte, dir folder, base string, cut bool, o LoadOptions) (*Scenario, error) {
	d := &decoder{file: file, strict: o.Strict}
	var doc yaml.Node
	var dec *yaml.Decoder
	var inline inlineObjects
	if cut {
		dec, inline = decodeCut(data, &doc)
	}
	if dec == nil {
		dec = yaml.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&doc); err != nil {
			return nil, syntaxProblem(file, err)
		}
	}
	if p := secondDocument(dec, file); p != nil {
		d.problems = append(d.problems, *p)
	}
	s := &Scenario{File: file, Dir: filepath.Dir(file), source: data, folder: dir, base: base, inline: inline, loadOpts: o}
	d.mode, _ = modeOf(&doc)
	d.folder = dir
	if proxy := valueNode(&doc, "proxy"); proxy != nil {
		if ref := valueNode(proxy, "config"); ref != nil {
			// The file may name the mode, which decides the keys.
			d.kpc = readKubeProxyConfig(d, s, proxy, ref)
			if d.kpc != nil && valueNode(proxy, "mode") == nil {
				d.mode, _ = LookupMode(string(d.kpc.Config.Mode))
			} else if d.kpcMode != nil && valueNode(proxy, "mode") == nil {
				d.mode = d.kpcMode
			}
		}
	}
	d.decode(&doc, "", reflectValue(s))
	// Validate even a file that did not decode cleanly, so that every
	// problem is reported at once.
	d.validate(s)
	if d.syntaxInDocs && inline.docs != nil {
		// A cut-out object that is not YAML makes the whole file not
		// YAML: the general path reports that as the file's one problem.
		return parseCut(file, data, dir, base, false, o)
	}
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
	s.Warnings = d.skipped
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
var supportedKinds = map[string]bool{"Service": true, "EndpointSlice": true, "Pod": true, "Node": true, "Endpoints": true,
	"Ingress": true, "IngressClass": true, "ConfigMap": true, "Secret": true}

func (d *decoder) validate(s *Scenario) {
	if strings.TrimSpace(s.Name) == "" {
		d.addAt(s.Src.At("name"), "required: a scenario name")
	}
	// state is every object as it is at this point of the timeline, so that
	// patches and churn are checked against what they will change.
	v := &Validator{d: d, s: s, known: map[string]bool{}, state: map[string]runtime.Object{}, scratch: map[any]any{}}
	if s.Proxy.Src.Line == 0 {
		if !d.has("proxy") {
			d.addAt(s.Src.At("proxy"), "required: the proxy under test (at least its version)")
		}
	} else {
		d.validateProxy(v, &s.Proxy)
	}
	d.validateControllers(v, &s.Controllers)
	d.validatePools(s)

	// A generated cluster comes first, then the objects cut out of a large
	// file (the file's objects list, which the general path then found
	// empty), then the objects listed.
	objects := d.generatedObjects(s)
	generated := len(objects)
	objects = append(objects, d.decodeInline(s.inline)...)
	for i := range s.Objects {
		objects = append(objects, d.objectsOf(s, &s.Objects[i], fmt.Sprintf("objects[%d]", i))...)
	}
	for _, o := range objects {
		if v.known[o.Key] {
			d.addAt(o.Pos, "%s is defined twice", o.Key)
		}
		v.known[o.Key] = true
		v.state[o.Key] = o.Obj
		s.Initial = append(s.Initial, o)
	}
	if len(s.Timeline) == 0 {
		d.addAt(s.Src.At("timeline"), "required: at least one step")
	}
	d.expandChurn(s, objects, generated)
	var last Duration
	for i := range s.Timeline {
		st := &s.Timeline[i]
		p := fmt.Sprintf("timeline[%d]", i)
		v.at, v.path = st.At, p
		v.expire()
		if st.At == nil {
			d.addAt(st.Src.At("at"), "required: the step's virtual instant, such as 1.5s")
		} else {
			if *st.At < last {
				d.addAt(st.Src.At("at"), "step at %v comes before the previous step at %v: steps must be in time order", st.At, last)
			}
			last = *st.At
		}
		if len(st.Actions) > 1 {
			d.addAt(Pos{st.Src.Line, st.Src.Column, p}, "a step takes one action (%s); split it into steps at the same instant", orList(d.actionKeys()))
		}
		if len(st.Actions) == 0 && st.Expect == nil && st.Note == "" {
			d.addAt(Pos{st.Src.Line, st.Src.Column, p}, "empty step: give an action, an expect or a note")
		}
		for _, a := range st.Actions {
			a.Validate(v)
		}
		if e := st.Expect; e != nil {
			for _, c := range e.Checks {
				c.Validate(v)
			}
			if e.Within != nil && st.At != nil {
				if _, ok := addInstant(*st.At, *e.Within); !ok {
					d.addAt(e.Src.At("within"), "%v after %v would pass the largest instant proxysim can represent (%v)", e.Within, st.At, time.Duration(math.MaxInt64))
				}
			}
		}
	}
}

// actionKeys names every action a step may take, for messages.
func (d *decoder) actionKeys() []string {
	var out []string
	for _, k := range d.actionKinds() {
		out = append(out, keysOf(reflect.TypeOf(k()))...)
	}
	return out
}

// orList writes "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

func (d *decoder) validateRef(kind, namespace, name string, src Src, known map[string]bool) {
	if !supportedKinds[kind] {
		d.addAt(src.At("kind"), "want %s, got %q", orList(slices.Sorted(maps.Keys(supportedKinds))), kind)
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

// kubeProxyModes are kube-proxy's own modes: one proxysim has no package
// for is reported as not modelled rather than unknown.
var kubeProxyModes = map[string]bool{"iptables": true, "nftables": true}

// validateProxy checks the fields every mode shares, then hands the mode
// its own.
func (d *decoder) validateProxy(v *Validator, p *Proxy) {
	fromFile := d.kpc != nil && !d.kpc.Explicit("mode")
	if fromFile {
		p.Mode = string(d.kpc.Config.Mode)
	} else if d.kpc == nil && d.kpcMode != nil && p.Mode == "" {
		p.Mode = d.kpcMode.Name()
	}
	m, ok := LookupMode(p.Mode)
	switch {
	case ok:
		p.Mode = m.Name()
		if d.kpc != nil {
			d.applyKubeProxyConfig(p, m)
			p.KubeProxy = d.kpc
		}
	case fromFile:
		d.kpc.Errorf("mode", "mode %q is not modelled yet; give proxy.mode (%s) to replay this configuration in another mode", p.Mode, orList(ModeNames()))
	case p.Mode == "":
		d.addAt(p.Src.At("mode"), "no proxy mode is registered (import a mode package, such as scenarios/ipvsmode)")
	case kubeProxyModes[p.Mode]:
		d.addAt(p.Src.At("mode"), "mode %q is not modelled yet; use %s", p.Mode, orList(ModeNames()))
	default:
		d.addAt(p.Src.At("mode"), "unknown mode %q (want %s)", p.Mode, orList(ModeNames()))
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
	if p.NodeName == "" {
		p.NodeName = "node-a"
	}
	d.validateRunnerVocabulary(p)
	if p.Settings != nil {
		p.Settings.Validate(v)
	}
}

// validateCounts checks a counting expectation's window and refuses
// negative counts: no count of events can be below 0.
func (d *decoder) validateCounts(src Src, between []Duration, count, atLeast, atMost *int) {
	d.validateWindow(between, src)
	for _, c := range []struct {
		key string
		v   *int
	}{{"count", count}, {"atLeast", atLeast}, {"atMost", atMost}} {
		if c.v != nil && *c.v < 0 {
			d.addAt(src.At(c.key), "must not be negative, got %d", *c.v)
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
		if docs, ok := splitJSON(data); ok {
			return d.decodeDocuments(name, docs)
		}
		if docs, ok := splitDocuments(data); ok {
			return d.decodeDocuments(name, expandLists(docs))
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
			out = append(out, d.manifestsOf(name, &doc, fmt.Sprintf("(document %d)", i))...)
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
	out, err := MergePatch(cur, pt.Merge)
	if err != nil {
		var pe *patchError
		if errors.As(err, &pe) && pe.Field != "" {
			d.add(findPath(pt.Merge, pe.Field), join(mp, pe.Field), "%s", pe.Msg)
		} else {
			d.add(pt.Merge, mp, "%v", err)
		}
		return
	}
	newKey, errs, _ := DefaultAndValidate(out)
	if newKey != key {
		d.add(pt.Merge, mp, "a patch cannot rename %s (to %s)", key, newKey)
		return
	}
	for _, e := range errs {
		d.add(findPath(pt.Merge, e.Field), join(mp, e.Field), "%s (after the patch)", fieldMessage(e))
	}
	state[key] = out
}

// syntaxProblem reports a scenario that is not YAML, at the place yaml.v3
// names.
func syntaxProblem(file string, err error) error {
	if errors.Is(err, io.EOF) {
		return Problems{{File: file, Line: 1, Column: 1, Msg: "empty scenario file"}}
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
	return Problems{{File: file, Line: line, Column: col, Path: "(syntax)", Msg: msg}}
}
