package scenarios

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Setting replaces one field of a scenario document: Path is dotted from
// the document's top (proxy.minSyncPeriod, proxy.syncCost.fixed,
// timeline[2].at), Value is YAML text (1s, v1.34.0, true, {fixed: 5ms}).
type Setting struct {
	Path  string
	Value string
}

func (st Setting) String() string { return st.Path + "=" + st.Value }

// SettingError is a setting that cannot apply: its path does not lead into
// the document, or the scenario it makes is not valid (Problems, as the
// loader reported them, their paths naming the document's fields).
// Settings are the ones to blame: one, or all of them when the problem is
// in a field none of them names (two settings that clash).
type SettingError struct {
	Settings []Setting
	Msg      string
	Problems []string
}

// Names writes the settings blamed, each after prefix (such as "--set ").
func (e *SettingError) Names(prefix string) string {
	parts := make([]string, len(e.Settings))
	for i, st := range e.Settings {
		parts[i] = prefix + st.String()
	}
	return strings.Join(parts, " with ")
}

// Reason is what is wrong, without the settings.
func (e *SettingError) Reason() string {
	if len(e.Problems) == 0 {
		return e.Msg
	}
	return strings.Join(e.Problems, "; ")
}

func (e *SettingError) Error() string { return e.Names("") + ": " + e.Reason() }

// WithSettings returns the scenario read again from its source with each
// setting's field replaced (a missing mapping key is added), and validated
// as a whole, exactly as if the file said so. The scenario itself is not
// changed; the copy keeps its name, file and folder (for the files it
// names), but --update cannot rewrite it.
//
// A problem the changed document has is blamed on the setting whose path
// leads to the field the loader names (or into it: a manifest refused
// whole), or on all of them when none does
// (two settings may clash, such as proxy.version and proxy.minSyncPeriod
// in a way that makes syncPeriod too short).
func (s *Scenario) WithSettings(sets []Setting) (*Scenario, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(s.source)).Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", s.File, err) // it loaded once: not expected
	}
	for _, st := range sets {
		if err := setField(&doc, st); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", s.File, err)
	}
	out, err := parse(s.File, buf.Bytes(), s.folder, "", s.loadOpts)
	if err == nil {
		return out, nil
	}
	ps, ok := err.(Problems)
	if !ok || len(sets) == 0 {
		return nil, err
	}
	// Lines in the rewritten document are not the file's: name the field.
	var blame []Setting
	var msgs []string
	for _, p := range ps {
		msg := p.Msg
		if p.Path != "" {
			msg = p.Path + ": " + p.Msg
		}
		if p.File != s.File {
			msg = p.Error() // a file the scenario names: its own lines
		}
		msgs = append(msgs, msg)
		for _, st := range sets {
			if (within(p.Path, st.Path) || p.Path != "" && within(st.Path, p.Path)) && !slices.Contains(blame, st) {
				blame = append(blame, st)
			}
		}
	}
	if len(blame) == 0 {
		blame = sets
	}
	return nil, &SettingError{Settings: blame, Problems: msgs}
}

// within reports whether field path p is path or inside it.
func within(p, path string) bool {
	return p == path || strings.HasPrefix(p, path+".") || strings.HasPrefix(p, path+"[")
}

// pathStep is one step of a setting's path: a mapping key or a sequence
// index.
type pathStep struct {
	key   string
	index int // -1 for a key
}

// parseSettingPath splits proxy.syncCost.fixed or timeline[2].at (also
// timeline.2.at) into steps.
func parseSettingPath(p string) ([]pathStep, error) {
	if p == "" {
		return nil, fmt.Errorf("empty path")
	}
	var out []pathStep
	for _, part := range strings.Split(p, ".") {
		key, rest, indexed := strings.Cut(part, "[")
		if key == "" && !indexed {
			return nil, fmt.Errorf("empty field name in %q", p)
		}
		if key != "" {
			if n, err := strconv.Atoi(key); err == nil {
				if n < 0 {
					return nil, fmt.Errorf("bad index in %q: want a number from 0", p)
				}
				out = append(out, pathStep{index: n})
			} else {
				out = append(out, pathStep{key: key, index: -1})
			}
		}
		for indexed {
			num, after, ok := strings.Cut(rest, "]")
			n, err := strconv.Atoi(num)
			if !ok || err != nil || n < 0 {
				return nil, fmt.Errorf("bad index in %q: want field[N] with N a number from 0", p)
			}
			out = append(out, pathStep{index: n})
			if after == "" {
				break
			}
			if !strings.HasPrefix(after, "[") {
				return nil, fmt.Errorf("bad index in %q: want field[N] with N a number from 0", p)
			}
			rest = after[1:]
		}
	}
	return out, nil
}

// setField replaces (or adds) the field st.Path names with st.Value.
func setField(doc *yaml.Node, st Setting) error {
	steps, err := parseSettingPath(st.Path)
	if err != nil {
		return &SettingError{Settings: []Setting{st}, Msg: err.Error()}
	}
	var val yaml.Node
	if strings.TrimSpace(st.Value) == "" {
		return &SettingError{Settings: []Setting{st}, Msg: "empty value"}
	}
	if err := yaml.Unmarshal([]byte(st.Value), &val); err != nil || len(val.Content) != 1 {
		msg := "not a YAML value"
		if err != nil {
			msg += ": " + strings.TrimPrefix(err.Error(), "yaml: ")
		}
		return &SettingError{Settings: []Setting{st}, Msg: msg}
	}
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	where := ""
	for i, step := range steps {
		last := i == len(steps)-1
		if step.index >= 0 {
			if n.Kind != yaml.SequenceNode {
				return &SettingError{Settings: []Setting{st}, Msg: fmt.Sprintf("%s is not a list: [%d] cannot index it", orTop(where), step.index)}
			}
			if step.index >= len(n.Content) {
				return &SettingError{Settings: []Setting{st}, Msg: fmt.Sprintf("%s has %d entries: no [%d]", orTop(where), len(n.Content), step.index)}
			}
			where = fmt.Sprintf("%s[%d]", where, step.index)
			if last {
				n.Content[step.index] = val.Content[0]
				return nil
			}
			n = n.Content[step.index]
			continue
		}
		if n.Kind != yaml.MappingNode {
			return &SettingError{Settings: []Setting{st}, Msg: fmt.Sprintf("%s is a %s, not a mapping: it has no field %q", orTop(where), kindName(n), step.key)}
		}
		where = join(where, step.key)
		var next *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == step.key {
				next = n.Content[j+1]
				if last {
					n.Content[j+1] = val.Content[0]
					return nil
				}
			}
		}
		if next == nil {
			// A key the document leaves out is added; the loader then
			// refuses one the format does not know.
			next = &yaml.Node{Kind: yaml.MappingNode}
			if last {
				next = val.Content[0]
			}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: step.key}, next)
			if last {
				return nil
			}
		}
		n = next
	}
	return nil
}

func orTop(where string) string {
	if where == "" {
		return "the document"
	}
	return where
}

// Digest identifies the scenario's source: the SHA-256 of the document as
// read, in hex. Two replays of equal digests replay the same story (the
// files it names aside).
func (s *Scenario) Digest() string {
	sum := sha256.Sum256(s.source)
	return hex.EncodeToString(sum[:])
}
