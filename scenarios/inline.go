package scenarios

import (
	"bytes"
	"fmt"
)

// inlineFastMin is the size from which a scenario's inline objects are cut
// out of the file and read like a manifest file's documents (in parallel,
// by the fast reader when it can); a smaller file goes whole to yaml.v3.
var inlineFastMin = 256 << 10

// inlineObjects are the items of a scenario's top-level objects list, cut out
// of its text.
type inlineObjects struct {
	docs   []document
	column int // the column their text starts at in the file, from 1
}

// cutInlineObjects finds the block list under a top-level "objects:" line
// whose items are all manifests, cuts its items out as documents, and
// returns the source with the block blanked (line numbers kept) and
// "objects: []" in its place. It reports false for any other shape, which
// the general path then reads.
func cutInlineObjects(data []byte) ([]byte, inlineObjects, bool) {
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
			if r := bytes.TrimLeft(rest, " "); len(r) == 0 || r[0] == '-' || r[0] == '{' || r[0] == '[' || bytes.HasPrefix(r, []byte("file:")) {
				return nil, inlineObjects{}, false // a list, a flow manifest or a file reference
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
	return out, inlineObjects{docs: items, column: ind + 3}, true
}

// decodeInline decodes cut-out inline objects as objects[i] of the scenario.
func (d *decoder) decodeInline(in inlineObjects) []Object {
	return d.decodeDocumentsAt(d.file, in.docs, func(i int) string { return fmt.Sprintf("objects[%d]", i) }, in.column-1)
}
