package scenarios

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Problem is one thing wrong with a scenario file, at a place in it.
type Problem struct {
	File   string
	Line   int
	Column int
	Path   string // field path, such as timeline[3].expect.syncs.count
	Msg    string
}

func (p Problem) Error() string {
	switch {
	case p.Line == 0:
		return fmt.Sprintf("%s: %s", p.File, p.Msg)
	case p.Path == "":
		return fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Column, p.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s: %s", p.File, p.Line, p.Column, p.Path, p.Msg)
}

// Problems is every problem found in one or more files.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Src remembers where a decoded struct and each of its keys came from.
// Structs that need positions for later checks carry a field `Src Src`.
type Src struct {
	Line, Column int
	Path         string
	Keys         map[string]Pos
}

// Pos is a place in a file and the field path there.
type Pos struct {
	Line, Column int
	Path         string
}

// At returns the position of key, or of the struct itself.
func (s Src) At(key string) Pos {
	if p, ok := s.Keys[key]; ok {
		return p
	}
	return Pos{Line: s.Line, Column: s.Column, Path: join(s.Path, key)}
}

// Duration is a time.Duration written as Go duration text ("1.5s", "15m").
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// nodeDecoder is implemented by types that decode themselves.
type nodeDecoder interface {
	decodeNode(n *yaml.Node) error
}

func (d *Duration) decodeNode(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a duration such as 1s or 250ms, got a %s", kindName(n))
	}
	if n.Value == "0" {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("want a duration such as 1s or 250ms, got %q", n.Value)
	}
	if v < 0 {
		return fmt.Errorf("duration %s is negative", n.Value)
	}
	*d = Duration(v)
	return nil
}

type decoder struct {
	file     string
	problems Problems
	visited  int
	// syntaxInDocs: a document decoded apart was not YAML.
	syntaxInDocs bool
	// mode is the scenario's mode, found before decoding (its parts decide
	// which keys exist); nil when proxy.mode names no registered mode.
	mode Mode
	// strict refuses objects of kinds proxysim does not model in manifest
	// files; otherwise they are skipped, each noted in skipped.
	strict  bool
	skipped Problems
	// dump: the manifests decoded come from a file (a cluster dump), where
	// the world's other kinds are loaded too.
	dump bool
	// kpc is proxy.config, read before decoding (it may name the mode).
	kpc *KubeProxyConfig
	// kpcMode is proxy.config's mode when the file decoded but was refused
	// (--strict, or a value kube-proxy refuses): the scenario's keys are
	// still that mode's, so that the file's problem is not followed by
	// others it caused.
	kpcMode Mode
	// folder is the scenario's folder, where files it names are read.
	folder folder
}

// maxNodes bounds the work one document may cause, aliases included (a
// "billion laughs" document expands exponentially).
const maxNodes = 200000

func (d *decoder) add(n *yaml.Node, path, format string, args ...any) {
	line, col := 0, 0
	if n != nil {
		line, col = n.Line, n.Column
	}
	d.problems = append(d.problems, Problem{File: d.file, Line: line, Column: col, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// has reports whether a problem was already found at path or below it.
func (d *decoder) has(path string) bool {
	for _, p := range d.problems {
		if p.Path == path || strings.HasPrefix(p.Path, path+".") || strings.HasPrefix(p.Path, path+"[") {
			return true
		}
	}
	return false
}

func (d *decoder) addAt(p Pos, format string, args ...any) {
	d.problems = append(d.problems, Problem{File: d.file, Line: p.Line, Column: p.Column, Path: p.Path, Msg: fmt.Sprintf(format, args...)})
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "scalar"
	case yaml.AliasNode:
		return "alias"
	}
	return "document"
}

var (
	nodeType = reflect.TypeOf(yaml.Node{})
	srcType  = reflect.TypeOf(Src{})
)

// decode fills v from n, recording every problem instead of stopping.
func (d *decoder) decode(n *yaml.Node, path string, v reflect.Value) {
	d.visited++
	if d.visited == maxNodes {
		d.add(n, path, "document too large: more than %d nodes after alias expansion", maxNodes)
	}
	if d.visited >= maxNodes {
		return
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if v.Kind() == reflect.Pointer {
		if n.Tag == "!!null" {
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, path, v.Elem())
		return
	}
	if v.CanAddr() {
		if pd, ok := v.Addr().Interface().(partsDecoder); ok {
			pd.decodeParts(d, n, path)
			return
		}
		if nd, ok := v.Addr().Interface().(nodeDecoder); ok {
			if err := nd.decodeNode(n); err != nil {
				d.add(n, path, "%v", err)
			}
			return
		}
	}
	if v.Type() == nodeType {
		v.Set(reflect.ValueOf(*n))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, path, v)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.add(n, path, "want a list, got a %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.decode(c, fmt.Sprintf("%s[%d]", path, i), s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.add(n, path, "want a mapping, got a %s", kindName(n))
			return
		}
		m := reflect.MakeMap(v.Type())
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			ev := reflect.New(v.Type().Elem()).Elem()
			d.decode(val, join(path, k.Value), ev)
			m.SetMapIndex(reflect.ValueOf(k.Value), ev)
		}
		v.Set(m)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.add(n, path, "want a string, got a %s", kindName(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		b, err := strconv.ParseBool(n.Value)
		if n.Kind != yaml.ScalarNode || err != nil || n.Tag != "!!bool" {
			d.add(n, path, "want true or false, got %q", n.Value)
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint16, reflect.Uint32:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			d.add(n, path, "want a whole number, got %q", n.Value)
			return
		}
		if v.Kind() == reflect.Uint16 || v.Kind() == reflect.Uint32 {
			u, err := strconv.ParseUint(n.Value, 0, v.Type().Bits())
			if err != nil {
				d.add(n, path, "number %s out of range", n.Value)
				return
			}
			v.SetUint(u)
			return
		}
		i, err := strconv.ParseInt(n.Value, 0, v.Type().Bits())
		if err != nil {
			d.add(n, path, "number %s out of range", n.Value)
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		f, err := strconv.ParseFloat(n.Value, 64)
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") || err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			d.add(n, path, "want a number, got %q", n.Value)
			return
		}
		v.SetFloat(f)
	default:
		panic(fmt.Sprintf("scenarios: cannot decode into %s", v.Type()))
	}
}

func (d *decoder) decodeStruct(n *yaml.Node, path string, v reflect.Value) {
	d.decodeMapping(n, path, []reflect.Value{v}, false)
}

// decodeMapping fills several structs from one mapping: each key goes to
// the struct with a field of that yaml tag (a mapping whose keys are spread
// over the core and a mode's parts). Every struct with a `Src Src` field
// receives the mapping's positions. A key no struct has is reported unless
// tolerate is set. present says which structs received at least one key.
func (d *decoder) decodeMapping(n *yaml.Node, path string, targets []reflect.Value, tolerate bool) (present []bool) {
	present = make([]bool, len(targets))
	if n.Kind != yaml.MappingNode {
		d.add(n, path, "want a mapping, got a %s", kindName(n))
		return present
	}
	type fieldAt struct{ target, index int }
	fields := map[string]fieldAt{}
	var names []string
	for ti, v := range targets {
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" {
				continue
			}
			fields[tag] = fieldAt{ti, i}
			names = append(names, tag)
		}
	}
	src := Src{Line: n.Line, Column: n.Column, Path: path, Keys: map[string]Pos{}}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		p := join(path, k.Value)
		f, ok := fields[k.Value]
		if !ok {
			if !tolerate {
				d.add(k, p, "unknown field %q%s", k.Value, suggest(k.Value, names))
			}
			continue
		}
		if seen[k.Value] {
			d.add(k, p, "field %q given twice", k.Value)
			continue
		}
		seen[k.Value] = true
		present[f.target] = true
		src.Keys[k.Value] = Pos{Line: val.Line, Column: val.Column, Path: p}
		d.decode(val, p, targets[f.target].Field(f.index))
	}
	for _, v := range targets {
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).Type == srcType {
				v.Field(i).Set(reflect.ValueOf(src))
			}
		}
	}
	return present
}

// suggest names the closest known field, for typos.
func suggest(got string, names []string) string {
	best, bestD := "", 3
	sort.Strings(names)
	for _, n := range names {
		if dd := editDistance(strings.ToLower(got), strings.ToLower(n)); dd < bestD {
			best, bestD = n, dd
		}
	}
	if best == "" {
		return " (known: " + strings.Join(names, ", ") + ")"
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func reflectValue(s *Scenario) reflect.Value { return reflect.ValueOf(s).Elem() }
