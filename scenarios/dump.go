package scenarios

import (
	"bytes"
	"encoding/json"
	"fmt"

	"go.yaml.in/yaml/v3"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networking "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A manifest file named by `objects: [{file: ...}]` may be a cluster dump,
// as `kubectl get svc,endpointslices,pods,nodes -A -o yaml` (or -o json)
// prints it: a `v1` `List` whose items are the objects, several documents,
// or several JSON values, with every field the API server fills in. Objects
// of a kind the world does not carry (a Deployment, a CRD's object) are
// skipped, each noted once, or refused when the load is strict.

// dumpKinds are the kinds a dump may hold: those defaultAndValidate checks
// by the API server's rules (Endpoints among them: kube-proxy never reads
// them, the Endpoints controller writes them).
var dumpKinds = map[schema.GroupVersionKind]bool{
	v1.SchemeGroupVersion.WithKind("Service"):              true,
	discovery.SchemeGroupVersion.WithKind("EndpointSlice"): true,
	v1.SchemeGroupVersion.WithKind("Pod"):                  true,
	v1.SchemeGroupVersion.WithKind("Node"):                 true,
	v1.SchemeGroupVersion.WithKind("Endpoints"):            true,
	v1.SchemeGroupVersion.WithKind("ConfigMap"):            true,
	v1.SchemeGroupVersion.WithKind("Secret"):               true,
	networking.SchemeGroupVersion.WithKind("Ingress"):      true,
	networking.SchemeGroupVersion.WithKind("IngressClass"): true,
}

// modelledKind reports whether a dump's object of this apiVersion and kind
// is loaded.
func modelledKind(gv, kind string) bool {
	return dumpKinds[schema.FromAPIVersionAndKind(gv, kind)]
}

// jsonHead is what a skipped object is named by.
type jsonHead struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

func jsonHeadOf(data []byte) (jsonHead, bool) {
	var h jsonHead
	if json.Unmarshal(data, &h) != nil {
		return h, false
	}
	return h, true
}

// skipUnmodelled handles a dump's object of a kind proxysim does not model:
// skipped with a note, or a problem when strict. done is false for any
// other object.
func skipUnmodelled(file string, dump, strict bool, h jsonHead, pos Pos) (p parsedDoc, done bool) {
	if !dump || h.APIVersion == "" || h.Kind == "" || modelledKind(h.APIVersion, h.Kind) {
		return parsedDoc{}, false
	}
	name := h.Metadata.Name
	if h.Metadata.Namespace != "" {
		name = h.Metadata.Namespace + "/" + name
	}
	if strict {
		return parsedDoc{problems: Problems{{File: file, Line: pos.Line, Column: pos.Column, Path: join(pos.Path, "kind"),
			Msg: fmt.Sprintf("%s %s (%s) is of a kind proxysim does not model (--strict; without it the object is skipped)", h.Kind, name, h.APIVersion)}}}, true
	}
	return parsedDoc{skipped: Problems{{File: file, Line: pos.Line, Column: pos.Column, Path: pos.Path,
		Msg: fmt.Sprintf("skipped %s %s (%s): proxysim does not model this kind", h.Kind, name, h.APIVersion)}}}, true
}

// manifestsOf decodes one document of a dump the general way: a List's
// items one by one, an object of a kind not modelled skipped.
func (d *decoder) manifestsOf(file string, n *yaml.Node, path string) []Object {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind == yaml.MappingNode && valueOf(n, "kind") == "List" && valueOf(n, "apiVersion") == "v1" {
		items := valueNode(n, "items")
		if items == nil || items.Tag == "!!null" {
			return nil
		}
		if items.Kind != yaml.SequenceNode {
			saved := d.file
			d.file = file
			d.add(items, join(path, "items"), "want a list of objects, got a %s", kindName(items))
			d.file = saved
			return nil
		}
		var out []Object
		for j, it := range items.Content {
			out = append(out, d.manifestsOf(file, it, fmt.Sprintf("%s.items[%d]", path, j))...)
		}
		return out
	}
	if n.Kind == yaml.MappingNode {
		h := jsonHead{APIVersion: valueOf(n, "apiVersion"), Kind: valueOf(n, "kind")}
		if m := valueNode(n, "metadata"); m != nil {
			h.Metadata.Name, h.Metadata.Namespace = valueOf(m, "name"), valueOf(m, "namespace")
		}
		if p, done := skipUnmodelled(file, true, d.strict, h, Pos{Line: n.Line, Column: n.Column, Path: path}); done {
			d.problems = append(d.problems, p.problems...)
			d.skipped = append(d.skipped, p.skipped...)
			return nil
		}
	}
	saved := d.dump
	d.dump = true
	defer func() { d.dump = saved }()
	if o, ok := d.decodeManifest(file, n, path); ok {
		return []Object{o}
	}
	return nil
}

// expandLists marks a manifest file's documents as a dump's and cuts the
// items of each kubectl List out as documents of their own, so that they
// are decoded in parallel by the fast path. A List the cut cannot read
// stays whole, for manifestsOf.
func expandLists(docs []document) []document {
	out := make([]document, 0, len(docs))
	for i, doc := range docs {
		doc.dump = true
		list := topLevel(doc.data, "kind: ") == "List" && topLevel(doc.data, "apiVersion: ") == "v1"
		if list || len(out) != i {
			// Named here when its place in the list is not its index.
			doc.path = fmt.Sprintf("(document %d)", i)
		}
		if list {
			if items, ok := cutListItems(doc); ok {
				out = append(out, items...)
				continue
			}
		}
		out = append(out, doc)
	}
	return out
}

// cutListItems cuts the block sequence under a List's top-level "items:"
// into one document per item, its text moved left by the item's indent
// (kubectl prints "- " at column 1; other tools indent it).
func cutListItems(doc document) ([]document, bool) {
	lines := bytes.SplitAfter(doc.data, []byte("\n"))
	start := -1
	for i, l := range lines {
		t := bytes.TrimRight(l, " \r\n")
		if bytes.Equal(t, []byte("items: []")) {
			return nil, true
		}
		if bytes.Equal(t, []byte("items:")) {
			start = i
			break
		}
	}
	if start < 0 {
		return nil, false
	}
	var items []document
	var cur [][]byte
	flush := func() {
		if cur != nil {
			items[len(items)-1].data = bytes.Join(cur, nil)
			cur = nil
		}
	}
	ind := -1
	for j := start + 1; j < len(lines); j++ {
		l := lines[j]
		n := indentOf(l)
		t := bytes.TrimRight(l[n:], "\r\n")
		if ind >= 0 && n >= ind+2 && cur != nil {
			cur = append(cur, l[ind+2:]) // the item's own text, comments and blank lines included
			continue
		}
		if len(t) == 0 || t[0] == '#' {
			if cur != nil {
				cur = append(cur, []byte("\n"))
			}
			continue
		}
		if ind < 0 {
			ind = n
		}
		if n < ind || n == ind && !bytes.HasPrefix(t, []byte("- ")) {
			if _, _, isKey := splitKey(t); n != 0 || t[0] == '-' || !isKey {
				return nil, false // not plain: the general path reads it
			}
			break // the List's next top-level key
		}
		if n != ind {
			return nil, false
		}
		flush()
		rest := l[ind+2:]
		if _, _, isKey := splitKey(bytes.TrimRight(rest, "\r\n")); !isKey || rest[0] == ' ' {
			return nil, false // not an object's first key
		}
		items = append(items, document{line: doc.line + j, path: fmt.Sprintf("%s.items[%d]", doc.path, len(items)), col: ind + 2, dump: true})
		cur = append(cur, rest)
	}
	flush()
	return items, true
}

// jsonBody is a document's text without its leading white space, when it
// is a JSON object.
func jsonBody(data []byte) ([]byte, bool) {
	body := bytes.TrimLeft(data, " \t\r\n")
	return body, len(body) > 0 && body[0] == '{'
}

// splitJSON cuts a JSON manifest file (one or more values, as `kubectl get
// -o json` prints them) into documents: each List item, or each value. Each
// document keeps its place in the file: its first line padded to its
// column. It reports false for a file that is not JSON objects, which the
// YAML path then reads (and, if it is not YAML either, reports).
func splitJSON(data []byte) ([]document, bool) {
	if _, ok := jsonBody(data); !ok {
		return nil, false
	}
	var docs []document
	lines := lineIndex{data: data, line: 1}
	doc := func(a, b int, path string) {
		line, col := lines.at(a)
		text := make([]byte, 0, col+b-a)
		text = append(text, bytes.Repeat([]byte(" "), col)...)
		docs = append(docs, document{data: append(text, data[a:b]...), line: line, path: path, dump: true})
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		start := skipJSONSpace(data, int(dec.InputOffset()), false)
		if start >= len(data) {
			return docs, true
		}
		if data[start] != '{' {
			return nil, false
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return nil, false
		}
		var gv, kind string
		type span struct{ a, b int }
		var items []span
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, false
			}
			key, _ := kt.(string)
			var raw json.RawMessage
			if key != "items" {
				if err := dec.Decode(&raw); err != nil {
					return nil, false
				}
				switch key {
				case "apiVersion":
					_ = json.Unmarshal(raw, &gv)
				case "kind":
					_ = json.Unmarshal(raw, &kind)
				}
				continue
			}
			t, err := dec.Token()
			if err != nil {
				return nil, false
			}
			if t != json.Delim('[') {
				continue // null, or not a list: not a List's items
			}
			for dec.More() {
				a := skipJSONSpace(data, int(dec.InputOffset()), true)
				if err := dec.Decode(&raw); err != nil {
					return nil, false
				}
				items = append(items, span{a, a + len(raw)})
			}
			if _, err := dec.Token(); err != nil {
				return nil, false
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, false
		}
		path := fmt.Sprintf("(document %d)", i)
		if kind == "List" && gv == "v1" {
			for j, it := range items {
				doc(it.a, it.b, fmt.Sprintf("%s.items[%d]", path, j))
			}
			continue
		}
		doc(start, int(dec.InputOffset()), path)
	}
}

// skipJSONSpace skips white space (and commas between values, if asked).
func skipJSONSpace(data []byte, i int, commas bool) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\r', '\n':
		case ',':
			if !commas {
				return i
			}
		default:
			return i
		}
		i++
	}
	return i
}

// lineIndex turns increasing byte offsets into lines and columns.
type lineIndex struct {
	data      []byte
	pos, line int
	lineStart int
}

// at returns the line (from 1) and the column (from 0) of offset a, which
// must not be before the previous one asked.
func (l *lineIndex) at(a int) (line, col int) {
	for {
		i := bytes.IndexByte(l.data[l.pos:a], '\n')
		if i < 0 {
			break
		}
		l.pos += i + 1
		l.line++
		l.lineStart = l.pos
	}
	l.pos = a
	return l.line, a - l.lineStart
}
