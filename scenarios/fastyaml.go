package scenarios

import (
	"bytes"
	"errors"
)

// fastJSON converts the plain block YAML that `kubectl get -o yaml` and most
// hand-written manifests use straight into JSON, an order of magnitude
// faster than building a yaml.Node tree. It takes only what it can convert
// exactly: block mappings and sequences, single-line plain and quoted
// scalars, and flat flow collections. Anything else (anchors, tags, block
// scalars, multi-line scalars, escapes, numbers in other notations) makes it
// give up, and the document takes the general path, which is also the path
// that locates a problem's line.
// It returns the index of the document's first content line.
func fastJSON(doc []byte, out *bytes.Buffer) (first int, ok bool) {
	for i, c := range doc {
		// Control characters are yaml.v3's to refuse, anything beyond ASCII
		// its to check as UTF-8, and a lone CR is a line break to it.
		if c < 0x20 && c != '\n' && c != '\r' || c >= 0x7f || c == '\r' && (i+1 == len(doc) || doc[i+1] != '\n') {
			return 0, false
		}
	}
	p := fastParser{out: out}
	for _, l := range bytes.Split(doc, []byte("\n")) {
		p.lines = append(p.lines, bytes.TrimRight(l, "\r"))
	}
	p.skip()
	first = p.i
	if p.i >= len(p.lines) {
		return 0, false
	}
	col := indentOf(p.lines[p.i])
	if col != 0 || p.isSeqItem(p.i, col) {
		return 0, false
	}
	if err := p.mapping(col); err != nil {
		return 0, false
	}
	p.skip()
	return first, p.i == len(p.lines)
}

var errGiveUp = errors.New("not plain block YAML")

type fastParser struct {
	lines [][]byte
	i     int
	out   *bytes.Buffer
}

// skip passes blank and comment lines.
func (p *fastParser) skip() {
	for p.i < len(p.lines) {
		t := bytes.TrimLeft(p.lines[p.i], " ")
		if len(t) != 0 && t[0] != '#' {
			return
		}
		p.i++
	}
}

func indentOf(l []byte) int {
	n := 0
	for n < len(l) && l[n] == ' ' {
		n++
	}
	return n
}

func (p *fastParser) isSeqItem(i, col int) bool {
	l := p.lines[i]
	return len(l) > col && l[col] == '-' && (len(l) == col+1 || l[col+1] == ' ')
}

// block converts the block collection starting at the current line, which
// is indented by col.
func (p *fastParser) block(col int) error {
	if p.isSeqItem(p.i, col) {
		return p.sequence(col)
	}
	return p.mapping(col)
}

func (p *fastParser) mapping(col int) error {
	p.out.WriteByte('{')
	var keys [][]byte
	for first := true; ; first = false {
		p.skip()
		if p.i >= len(p.lines) {
			break
		}
		l := p.lines[p.i]
		ind := indentOf(l)
		if ind < col || ind == col && p.isSeqItem(p.i, col) {
			break
		}
		if ind > col || bytes.IndexByte(l, '\t') >= 0 {
			return errGiveUp
		}
		key, rest, ok := splitKey(l[col:])
		if !ok {
			return errGiveUp
		}
		for _, k := range keys {
			if bytes.Equal(k, key) {
				return errGiveUp // duplicate: the general path reports it
			}
		}
		keys = append(keys, key)
		if !first {
			p.out.WriteByte(',')
		}
		if err := p.scalarString(key); err != nil {
			return err
		}
		p.out.WriteByte(':')
		p.i++
		if len(rest) > 0 {
			if err := p.inline(rest); err != nil {
				return err
			}
			if err := p.noContinuation(col); err != nil {
				return err
			}
			continue
		}
		// A nested block: deeper, or a sequence at the key's own column.
		p.skip()
		if p.i < len(p.lines) {
			if ind := indentOf(p.lines[p.i]); ind > col || ind == col && p.isSeqItem(p.i, col) {
				if err := p.block(ind); err != nil {
					return err
				}
				continue
			}
		}
		p.out.WriteString("null")
	}
	p.out.WriteByte('}')
	return nil
}

func (p *fastParser) sequence(col int) error {
	p.out.WriteByte('[')
	for first := true; ; first = false {
		p.skip()
		if p.i >= len(p.lines) {
			break
		}
		l := p.lines[p.i]
		if indentOf(l) != col || !p.isSeqItem(p.i, col) {
			if indentOf(l) > col {
				return errGiveUp
			}
			break
		}
		if !first {
			p.out.WriteByte(',')
		}
		rest := stripComment(bytes.TrimLeft(l[col+1:], " "))
		if len(rest) == 0 {
			p.i++
			p.skip()
			if p.i >= len(p.lines) || indentOf(p.lines[p.i]) <= col {
				p.out.WriteString("null")
				continue
			}
			if err := p.block(indentOf(p.lines[p.i])); err != nil {
				return err
			}
			continue
		}
		if _, _, isKey := splitKey(rest); isKey || rest[0] == '-' && (len(rest) == 1 || rest[1] == ' ') {
			// "- key: value" opens a mapping (or a nested sequence) at the
			// column of its first key: blank the dash and read it there.
			line := append([]byte(nil), l...)
			line[col] = ' '
			p.lines[p.i] = line
			if err := p.block(indentOf(line)); err != nil {
				return err
			}
			continue
		}
		p.i++
		if err := p.inline(rest); err != nil {
			return err
		}
		if err := p.noContinuation(col); err != nil {
			return err
		}
	}
	p.out.WriteByte(']')
	return nil
}

// noContinuation gives up on a scalar continued on a deeper line.
func (p *fastParser) noContinuation(col int) error {
	j := p.i
	for j < len(p.lines) {
		t := bytes.TrimLeft(p.lines[j], " ")
		if len(t) != 0 && t[0] != '#' {
			break
		}
		j++
	}
	if j < len(p.lines) && indentOf(p.lines[j]) > col {
		return errGiveUp
	}
	return nil
}

// splitKey splits "key: value" (value possibly empty); the key is plain or
// quoted.
func splitKey(s []byte) (key, rest []byte, ok bool) {
	if len(s) == 0 {
		return nil, nil, false
	}
	var end int
	switch s[0] {
	case '"', '\'':
		q := bytes.IndexByte(s[1:], s[0])
		if q < 0 {
			return nil, nil, false
		}
		end = q + 2
	default:
		end = bytes.IndexByte(s, ':')
		for end >= 0 && end+1 < len(s) && s[end+1] != ' ' {
			n := bytes.IndexByte(s[end+1:], ':')
			if n < 0 {
				return nil, nil, false
			}
			end += n + 1
		}
		if end <= 0 {
			return nil, nil, false
		}
	}
	if end > 1000 {
		return nil, nil, false // YAML bounds an implicit key at 1024 characters
	}
	if end >= len(s) || s[end] != ':' || end+1 < len(s) && s[end+1] != ' ' {
		return nil, nil, false
	}
	key = bytes.TrimRight(s[:end], " ")
	rest = stripComment(bytes.TrimLeft(s[end+1:], " "))
	if len(key) == 0 || bytes.ContainsAny(key, "#&*!|>{}[],?%@`<") && key[0] != '"' && key[0] != '\'' {
		return nil, nil, false
	}
	if plainNonString(key) {
		return nil, nil, false // yaml.v3 would make the key a number, bool or null
	}
	return key, rest, true
}

// stripComment drops a trailing " # comment" outside quotes.
func stripComment(s []byte) []byte {
	if len(s) == 0 || s[0] == '#' {
		return nil
	}
	if s[0] == '"' || s[0] == '\'' {
		if q := bytes.IndexByte(s[1:], s[0]); q >= 0 {
			tail := bytes.TrimLeft(s[q+2:], " ")
			if len(tail) == 0 || tail[0] == '#' {
				return s[:q+2]
			}
		}
		return s
	}
	if i := bytes.Index(s, []byte(" #")); i >= 0 {
		s = s[:i]
	}
	return bytes.TrimRight(s, " ")
}

// inline converts a value written on its key's line.
func (p *fastParser) inline(v []byte) error {
	switch v[0] {
	case '{', '[':
		return p.flow(v)
	case '|', '>', '&', '*', '!', '%', '@', '`', '?':
		return errGiveUp
	}
	return p.scalar(v)
}

// flow converts {} and [], and flat flow collections of scalars.
func (p *fastParser) flow(v []byte) error {
	closeCh := byte('}')
	if v[0] == '[' {
		closeCh = ']'
	}
	if v[len(v)-1] != closeCh {
		return errGiveUp
	}
	body := bytes.TrimSpace(v[1 : len(v)-1])
	if bytes.ContainsAny(body, "{}[]&*!|>#") {
		return errGiveUp
	}
	p.out.WriteByte(v[0])
	var keys [][]byte
	if len(body) > 0 {
		for i, item := range bytes.Split(body, []byte(",")) {
			item = bytes.TrimSpace(item)
			if len(item) == 0 {
				return errGiveUp
			}
			if i > 0 {
				p.out.WriteByte(',')
			}
			if closeCh == '}' {
				k, val, ok := splitKey(item)
				if !ok || len(val) == 0 {
					return errGiveUp
				}
				for _, seen := range keys {
					if bytes.Equal(seen, k) {
						return errGiveUp // duplicate: the general path reports it
					}
				}
				keys = append(keys, k)
				if err := p.scalarString(k); err != nil {
					return err
				}
				p.out.WriteByte(':')
				item = val
			}
			if err := p.scalar(item); err != nil {
				return err
			}
		}
	}
	p.out.WriteByte(closeCh)
	return nil
}

// scalar converts one scalar the way yaml.v3 resolves it for an interface{}
// value, or gives up on anything but strings, decimal integers, booleans
// and null.
func (p *fastParser) scalar(v []byte) error {
	if (v[0] == '-' || v[0] == '?' || v[0] == ':') && (len(v) == 1 || v[1] == ' ') {
		return errGiveUp // an indicator, not a scalar
	}
	switch v[0] {
	case '"', '\'':
		return p.scalarString(v)
	}
	switch string(v) {
	case "true", "True", "TRUE":
		p.out.WriteString("true")
		return nil
	case "false", "False", "FALSE":
		p.out.WriteString("false")
		return nil
	case "null", "Null", "NULL", "~":
		p.out.WriteString("null")
		return nil
	}
	if c := v[0]; c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' {
		if isDecimal(string(v)) {
			p.out.Write(v)
			return nil
		}
		if numberLike(v) {
			return errGiveUp // floats, octal, hex: yaml.v3 resolves those
		}
		// Anything else (an IP address, a date, a version) is a string,
		// as yaml.v3 decodes it into an interface{}.
	}
	if bytes.Contains(v, []byte(": ")) || v[len(v)-1] == ':' || bytes.ContainsAny(v[:1], ",]}#&*!|>%@`?:") {
		return errGiveUp
	}
	return p.scalarString(v)
}

// scalarString writes a plain or quoted scalar as a JSON string.
func (p *fastParser) scalarString(v []byte) error {
	switch v[0] {
	case '"':
		if len(v) < 2 || v[len(v)-1] != '"' || bytes.IndexByte(v[1:len(v)-1], '\\') >= 0 || bytes.IndexByte(v[1:len(v)-1], '"') >= 0 {
			return errGiveUp
		}
		v = v[1 : len(v)-1]
	case '\'':
		if len(v) < 2 || v[len(v)-1] != '\'' {
			return errGiveUp
		}
		if bytes.IndexByte(bytes.ReplaceAll(v[1:len(v)-1], []byte("''"), nil), '\'') >= 0 {
			return errGiveUp
		}
		v = bytes.ReplaceAll(v[1:len(v)-1], []byte("''"), []byte("'"))
	}
	writeString(p.out, string(v))
	return nil
}

// numberLike reports whether a plain scalar might resolve to a number in
// one of YAML's notations other than a plain decimal integer.
func numberLike(v []byte) bool {
	if v[0] == '-' || v[0] == '+' {
		v = v[1:]
	}
	if len(v) == 0 {
		return true
	}
	if len(v) >= 2 && v[0] == '0' && bytes.IndexByte([]byte("bBoOxX"), v[1]) >= 0 {
		return true
	}
	if len(v) >= 6 && v[4] == '-' && isDigits(v[:4]) {
		return true // a timestamp: yaml.v3 turns 2006-1-2 into a time
	}
	if v[0] == '.' && len(v) > 1 && (v[1]|0x20) >= 'a' && (v[1]|0x20) <= 'z' {
		return true // .inf, .nan
	}
	i, dots := 0, 0
	for i < len(v) && (v[i] >= '0' && v[i] <= '9' || v[i] == '_' || v[i] == '.') {
		if v[i] == '.' {
			dots++
		}
		i++
	}
	if dots > 1 {
		return false
	}
	if i == len(v) {
		return true
	}
	return v[i] == 'e' || v[i] == 'E'
}

func isDigits(v []byte) bool {
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// plainNonString reports whether a plain scalar might resolve to something
// other than a string.
func plainNonString(v []byte) bool {
	switch v[0] {
	case '"', '\'':
		return false
	case '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '-', '+', '.', '~':
		return true
	}
	switch string(v) {
	case "true", "True", "TRUE", "false", "False", "FALSE", "null", "Null", "NULL":
		return true
	}
	return false
}
