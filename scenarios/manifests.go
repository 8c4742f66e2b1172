package scenarios

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	sigsjson "sigs.k8s.io/json"
)

// A manifest file (a cluster dump of tens of megabytes) is split into its
// YAML documents, which are parsed and decoded in parallel, then merged in
// file order, so that loading it scales with the machine's cores and the
// problems come out the same on every run.

// document is one YAML document of a manifest file.
type document struct {
	data []byte
	line int // the line of the file its first line is, from 1
	// path and col, when set, name the document and shift its columns
	// further right (an item of a kubectl List).
	path string
	col  int
	// dump: a document of a manifest file, where kinds proxysim does not
	// model are skipped (or refused, strictly) rather than errors.
	dump bool
}

// splitDocuments cuts a multi-document YAML file at its "---" markers. It
// reports false for a file that a plain cut could misread (directives),
// which is then decoded as one stream.
func splitDocuments(data []byte) ([]document, bool) {
	var docs []document
	start, startLine, line := 0, 1, 1
	for i := 0; i < len(data); {
		end := bytes.IndexByte(data[i:], '\n')
		next := len(data)
		if end >= 0 {
			next = i + end + 1
		}
		l := data[i:next]
		switch {
		case len(l) > 0 && l[0] == '%':
			return nil, false
		case bytes.HasPrefix(l, []byte("---")) && (len(l) == 3 || l[3] == '\n' || l[3] == ' ' || l[3] == '\t' || l[3] == '\r'):
			if i > start {
				docs = append(docs, document{data: data[start:i], line: startLine})
			}
			// Keep what follows the marker on its line, in its column.
			start, startLine = i, line
			data[i], data[i+1], data[i+2] = ' ', ' ', ' '
		}
		i = next
		line++
	}
	if start < len(data) {
		docs = append(docs, document{data: data[start:], line: startLine})
	}
	return docs, true
}

// parsedDoc is one document's outcome.
type parsedDoc struct {
	objs     []Object
	problems Problems
	skipped  Problems // objects of kinds proxysim does not model, skipped
	syntax   bool     // the document is not YAML
}

// decodeDocuments decodes the documents of a manifest file in parallel.
func (d *decoder) decodeDocuments(name string, docs []document) []Object {
	return d.decodeDocumentsAt(name, docs, func(i int) string { return fmt.Sprintf("(document %d)", i) }, 0)
}

// decodeDocumentsAt decodes documents in parallel, naming the i-th pathOf(i);
// their text starts shift columns right of the file's margin.
func (d *decoder) decodeDocumentsAt(name string, docs []document, pathOf func(int) string, shift int) []Object {
	out := make([]parsedDoc, len(docs))
	workers := min(runtime.GOMAXPROCS(0), len(docs))
	var wg sync.WaitGroup
	var next atomic.Int64
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(docs); i = int(next.Add(1) - 1) {
				p := pathOf(i)
				if docs[i].path != "" {
					p = docs[i].path
				}
				out[i] = decodeDocument(name, docs[i], p, shift+docs[i].col, d.strict)
			}
		})
	}
	wg.Wait()
	var objs []Object
	for _, p := range out {
		d.syntaxInDocs = d.syntaxInDocs || p.syntax
		d.problems = append(d.problems, p.problems...)
		d.skipped = append(d.skipped, p.skipped...)
		objs = append(objs, p.objs...)
	}
	return objs
}

func decodeDocument(name string, doc document, path string, shift int, strict bool) parsedDoc {
	// The fast paths first; a document they cannot take, or one with a
	// problem, goes the general way, which knows every node's line.
	var buf bytes.Buffer
	if body, ok := jsonBody(doc.data); ok {
		lead := doc.data[:len(doc.data)-len(body)]
		line := doc.line + bytes.Count(lead, []byte("\n"))
		col := 1 + shift + len(lead) - (bytes.LastIndexByte(lead, '\n') + 1)
		// A List goes the general way, which reads its items.
		if h, ok := jsonHeadOf(body); ok && h.Kind != "List" {
			pos := Pos{Line: line, Column: col, Path: path}
			if p, done := skipUnmodelled(name, doc.dump, strict, h, pos); done {
				return p
			}
			if o, ok := decodeFast(name, h.APIVersion, h.Kind, body, pos, doc.dump); ok {
				return parsedDoc{objs: []Object{o}}
			}
		}
	} else if first, ok := fastJSON(doc.data, &buf); ok {
		pos := Pos{Line: doc.line + first, Column: 1 + shift, Path: path}
		gv, kind := topLevel(doc.data, "apiVersion: "), topLevel(doc.data, "kind: ")
		if doc.dump && kind == "List" {
			// A List the cut could not read: the general path reads its items.
		} else if doc.dump && gv != "" && kind != "" && !modelledKind(gv, kind) {
			if h, ok := jsonHeadOf(buf.Bytes()); ok {
				if p, done := skipUnmodelled(name, doc.dump, strict, h, pos); done {
					return p
				}
			}
		}
		if o, ok := decodeFast(name, gv, kind, buf.Bytes(), pos, doc.dump); ok {
			return parsedDoc{objs: []Object{o}}
		}
	}
	sub := &decoder{file: name, strict: strict}
	var n yaml.Node
	if err := yaml.Unmarshal(doc.data, &n); err != nil {
		line := doc.line
		if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
			l, _ := strconv.Atoi(m[1])
			line += l - 1
		}
		sub.problems = append(sub.problems, Problem{File: name, Line: line, Column: 1 + shift, Path: path, Msg: err.Error()})
		return parsedDoc{problems: sub.problems, syntax: true}
	}
	if len(n.Content) == 0 || n.Content[0].Tag == "!!null" {
		return parsedDoc{}
	}
	shiftLines(&n, doc.line-1, shift)
	var objs []Object
	if doc.dump {
		objs = sub.manifestsOf(name, &n, path)
	} else if o, ok := sub.decodeManifest(name, &n, path); ok {
		objs = []Object{o}
	}
	return parsedDoc{objs: objs, problems: sub.problems, skipped: sub.skipped}
}

// shiftLines moves a document's positions to the file's lines and columns.
func shiftLines(n *yaml.Node, by, cols int) {
	if by == 0 && cols == 0 {
		return
	}
	stack := []*yaml.Node{n}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n.Line += by
		n.Column += cols
		stack = append(stack, n.Content...)
	}
}

// maxJSONNodes bounds the nodes one manifest may expand to, aliases
// included, so that a "billion laughs" manifest is refused, not expanded.
const maxJSONNodes = 2_000_000

var errTooManyNodes = fmt.Errorf("manifest too large: more than %d nodes after alias expansion", maxJSONNodes)

// nodeJSON writes a YAML node as JSON, as decoding it into an interface and
// marshalling that would, without building either.
func nodeJSON(b *bytes.Buffer, n *yaml.Node, count *int) error {
	if *count++; *count > maxJSONNodes {
		return errTooManyNodes
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			b.WriteString("null")
			return nil
		}
		return nodeJSON(b, n.Content[0], count)
	case yaml.AliasNode:
		return nodeJSON(b, n.Alias, count)
	case yaml.MappingNode:
		if n.Tag != "!!map" && n.Tag != "" {
			return generic(b, n)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				// Merge keys, aliased and complex keys: yaml.v3 resolves them.
				return generic(b, n)
			}
		}
		b.WriteByte('{')
		seen := make(map[string]bool, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if seen[k.Value] {
				return fmt.Errorf("line %d: mapping key %q already defined", k.Line, k.Value)
			}
			if len(seen) > 0 {
				b.WriteByte(',')
			}
			seen[k.Value] = true
			writeString(b, k.Value)
			b.WriteByte(':')
			if err := nodeJSON(b, n.Content[i+1], count); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := nodeJSON(b, c, count); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	}
	switch n.Tag {
	case "!!str":
		writeString(b, n.Value)
		return nil
	case "!!null":
		b.WriteString("null")
		return nil
	case "!!bool":
		switch n.Value {
		case "true", "True", "TRUE":
			b.WriteString("true")
			return nil
		case "false", "False", "FALSE":
			b.WriteString("false")
			return nil
		}
	case "!!int":
		if isDecimal(n.Value) {
			b.WriteString(n.Value)
			return nil
		}
	}
	return generic(b, n)
}

func isDecimal(s string) bool {
	if s == "" || s == "-" {
		return false
	}
	for i, c := range s {
		if c == '-' && i == 0 {
			continue
		}
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(s) < 18 && (s[0] != '0' || len(s) == 1) && !(s[0] == '-' && len(s) > 1 && s[1] == '0')
}

// generic encodes what the fast path does not cover (other tags, numbers in
// YAML's other notations, merge keys) the slow, exact way.
func generic(b *bytes.Buffer, n *yaml.Node) error {
	var v any
	if err := n.Decode(&v); err != nil {
		return err
	}
	data, err := json.Marshal(jsonable(v))
	if err != nil {
		return err
	}
	b.Write(data)
	return nil
}

// jsonable turns the map[interface{}]interface{} yaml.v3 may produce into
// something encoding/json accepts.
func jsonable(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = jsonable(e)
		}
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range t {
			t[i] = jsonable(e)
		}
	}
	return v
}

func writeString(b *bytes.Buffer, s string) {
	simple := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			simple = false
			break
		}
	}
	if simple {
		b.WriteByte('"')
		b.WriteString(s)
		b.WriteByte('"')
		return
	}
	data, _ := json.Marshal(s)
	b.Write(data)
}

// decodeFast decodes a manifest converted to JSON, of the apiVersion gv and
// kind given; it reports false on any problem, which the general path then
// locates. It decodes into the type they name, strictly (unknown and
// duplicate fields are errors), as the API server's strict decoding does.
// A dump may also hold the world's other kinds (dumpKinds).
func decodeFast(file, gv, kind string, data []byte, pos Pos, dump bool) (Object, bool) {
	if gv == "" || kind == "" {
		return Object{}, false
	}
	gvk := schema.FromAPIVersionAndKind(gv, kind)
	obj, err := scheme.Scheme.New(gvk)
	if err != nil {
		return Object{}, false
	}
	strict, err := sigsjson.UnmarshalStrict(data, obj)
	if err != nil || len(strict) > 0 {
		return Object{}, false
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	key, errs, supported := DefaultAndValidate(obj)
	if !supported || len(errs) > 0 {
		return Object{}, false
	}
	return Object{Obj: obj, Kind: kind, Key: key, Pos: pos, File: file}, true
}

// topLevel finds a top-level "key: value" line with a plain value.
func topLevel(doc []byte, prefix string) string {
	for rest := doc; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if v, ok := bytes.CutPrefix(line, []byte(prefix)); ok {
			v = bytes.TrimSpace(v)
			if len(v) == 0 || bytes.ContainsAny(v, "'\"# ") {
				return ""
			}
			return string(v)
		}
	}
	return ""
}
