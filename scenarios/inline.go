package scenarios

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// inlineFastMin is the size from which a scenario's inline objects are cut
// out of the file and read like a manifest file's documents (in parallel,
// by the fast reader when it can); a smaller file goes whole to yaml.v3.
var inlineFastMin = 256 << 10

// inlineObjects are the items of a scenario's top-level objects list, cut out
// of its text.
type inlineObjects struct {
	docs    []document
	column  int // the column their text starts at in the file, from 1
	keyLine int // the line of "objects:"
}

// holds reports whether the rest of the file, parsed, has the cut-out list
// where it was: "objects" a key of the top-level mapping, on its line. Any
// other reading of the file (a syntax error, another root) is the general
// path's to report.
func (in inlineObjects) holds(doc *yaml.Node) bool {
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return false
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value == "objects" {
			return k.Line == in.keyLine && k.Column == 1 && v.Kind == yaml.SequenceNode && len(v.Content) == 0
		}
	}
	return false
}

// cutInlineObjects finds the block list under a top-level "objects:" line
// whose items are all manifests, cuts its items out as documents, and
// returns the source with the block blanked (line numbers kept) and
// "objects: []" in its place. It reports false for any other shape, which
// the general path then reads.
func cutInlineObjects(data []byte) ([]byte, inlineObjects, bool) {
	// Bytes yaml.v3 refuses make the whole file unreadable to it, wherever
	// they are (a comment included): its error is the one to report.
	if !utf8.Valid(data) {
		return nil, inlineObjects{}, false
	}
	for _, c := range data {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7f {
			return nil, inlineObjects{}, false
		}
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	start := -1
	for i, l := range lines {
		if t := bytes.TrimRight(l, " \r\n"); bytes.Equal(t, []byte("objects:")) {
			start = i
			break
		}
	}
	if start < 0 {
		return nil, inlineObjects{}, false
	}
	blank := func(l []byte) bool {
		t := bytes.TrimLeft(l, " ")
		return len(bytes.TrimRight(t, "\r\n")) == 0 || t[0] == '#'
	}
	end, ind := start+1, -1
	var items []document
	var cur [][]byte
	flush := func() {
		if cur != nil {
			items[len(items)-1].data = bytes.Join(cur, nil)
			cur = nil
		}
	}
	for ; end < len(lines); end++ {
		l := lines[end]
		if blank(l) {
			if cur != nil {
				cur = append(cur, []byte("\n"))
			}
			continue
		}
		n := indentOf(l)
		if ind < 0 {
			ind = n
		}
		if n < ind || n == ind && !bytes.HasPrefix(l[n:], []byte("- ")) {
			if ind == 0 && n == 0 {
				break // the next top-level key
			}
			if n < ind {
				break
			}
			return nil, inlineObjects{}, false
		}
		if n == ind {
			flush()
			rest := l[ind+2:]
			r := bytes.TrimRight(rest, "\r\n")
			if _, _, isKey := splitKey(r); !isKey || r[0] == ' ' || bytes.HasPrefix(r, []byte("file:")) {
				return nil, inlineObjects{}, false // not a manifest's first key, or a file reference
			}
			items = append(items, document{line: end + 1})
			cur = append(cur, rest)
			continue
		}
		if n < ind+2 {
			return nil, inlineObjects{}, false
		}
		cur = append(cur, l[ind+2:])
	}
	flush()
	if len(items) == 0 {
		return nil, inlineObjects{}, false
	}
	out := make([]byte, 0, len(data))
	for i, l := range lines {
		switch {
		case i == start:
			out = append(out, "objects: []\n"...)
		case i > start && i < end:
			out = append(out, '\n')
		default:
			out = append(out, l...)
		}
	}
	return out, inlineObjects{docs: items, column: ind + 3, keyLine: start + 1}, true
}

// decodeCut parses data with its inline objects cut out, into doc, and
// returns the decoder (for what follows the document) and the objects; a nil
// decoder when the file cannot be read that way.
func decodeCut(data []byte, doc *yaml.Node) (*yaml.Decoder, inlineObjects) {
	rest, in, ok := cutInlineObjects(data)
	if !ok {
		return nil, inlineObjects{}
	}
	dec := yaml.NewDecoder(bytes.NewReader(rest))
	if dec.Decode(doc) != nil || !in.holds(doc) {
		*doc = yaml.Node{}
		return nil, inlineObjects{}
	}
	return dec, in
}

// decodeInline decodes cut-out inline objects as objects[i] of the scenario.
func (d *decoder) decodeInline(in inlineObjects) []Object {
	return d.decodeDocumentsAt(d.file, in.docs, func(i int) string { return fmt.Sprintf("objects[%d]", i) }, in.column-1)
}
