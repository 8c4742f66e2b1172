package replay

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/proxysim/proxysim/scenarios"
)

// CheckGolden compares what read renders from the run (nil: the
// dataplane's Snapshot) with the golden; under --update a golden that
// differs is queued for rewriting instead. A mode with more than one
// golden gives its others a read of their own.
func (r *Run) CheckGolden(g scenarios.Golden, read func(*Run) (string, error)) {
	if !g.Given() {
		return
	}
	if read == nil {
		read = func(r *Run) (string, error) { return r.Dataplane().Snapshot() }
	}
	got, err := read(r)
	if err != nil {
		got = "error: " + err.Error()
	}
	rp := r.r
	want, pos, file, key := "", g.Src.At(g.Key), "", g.Key
	if g.Inline != nil {
		want = *g.Inline
	} else {
		pos, file, key = g.Src.At(g.FileKey), g.File, g.FileKey
		b, err := rp.s.ReadFile(g.File)
		if err != nil && !rp.opts.Update {
			// One failure says it all: there is nothing to compare with.
			r.Fail(pos, key, "a readable golden file "+g.File, err.Error())
			return
		}
		want = string(b)
	}
	if normalize(want) != normalize(got) {
		if rp.opts.Update {
			rp.golden = append(rp.golden, goldenUpdate{file: file, pos: pos, text: got, inline: g.Inline != nil, key: g.Key})
		} else {
			r.Fail(pos, key, want, got)
		}
	}
}

type goldenUpdate struct {
	file   string // a golden file, or "" for an inline golden
	pos    scenarios.Pos
	text   string
	inline bool
	key    string
}

// normalize drops trailing spaces and blank lines so that goldens survive
// editors.
func normalize(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n "), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	return strings.Join(lines, "\n")
}

// writeGoldens applies --update: golden files are rewritten; inline goldens
// are rewritten in the scenario file, bottom-up so line numbers hold.
func (r *replayer) writeGoldens() error {
	var inline []goldenUpdate
	for _, g := range r.golden {
		if !g.inline {
			if err := r.s.WriteFile(g.file, []byte(g.text)); err != nil {
				return fmt.Errorf("--update: %w", err)
			}
			r.res.Updated = append(r.res.Updated, filepath.Join(r.s.Dir, g.file))
			continue
		}
		inline = append(inline, g)
	}
	if len(inline) == 0 {
		return nil
	}
	src, err := rewriteInline(r.s.Source(), inline)
	if err != nil {
		return fmt.Errorf("--update %s: %w", r.s.File, err)
	}
	if r.s.OwnFile() == "" {
		return fmt.Errorf("--update %s: a scenario parsed from memory cannot be rewritten", r.s.File)
	}
	if err := r.s.WriteFile(r.s.OwnFile(), src); err != nil {
		return fmt.Errorf("--update: %w", err)
	}
	r.res.Updated = append(r.res.Updated, r.s.File)
	return nil
}

// rewriteInline replaces the content of literal block scalars (`key: |`).
func rewriteInline(src []byte, ups []goldenUpdate) ([]byte, error) {
	lines := strings.Split(string(src), "\n")
	sort.Slice(ups, func(i, j int) bool { return ups[i].pos.Line > ups[j].pos.Line })
	for _, u := range ups {
		head := u.pos.Line - 1 // the line holding `|`
		if head < 0 || head >= len(lines) || !strings.Contains(lines[head], "|") {
			return nil, fmt.Errorf("line %d: only a literal block golden (%s: |) can be rewritten", u.pos.Line, u.key)
		}
		keyIndent := len(lines[head]) - len(strings.TrimLeft(lines[head], " "))
		end := head + 1
		indent := -1
		for end < len(lines) {
			l := lines[end]
			if strings.TrimSpace(l) == "" {
				end++
				continue
			}
			ind := len(l) - len(strings.TrimLeft(l, " "))
			if indent < 0 {
				if ind <= keyIndent {
					break
				}
				indent = ind
			}
			if ind < indent {
				break
			}
			end++
		}
		// keep trailing blank lines outside the block
		for end > head+1 && strings.TrimSpace(lines[end-1]) == "" {
			end--
		}
		if indent < 0 {
			indent = keyIndent + 2
		}
		pad := strings.Repeat(" ", indent)
		var body []string
		for _, l := range strings.Split(strings.TrimRight(u.text, "\n"), "\n") {
			body = append(body, strings.TrimRight(pad+l, " "))
		}
		lines = append(lines[:head+1], append(body, lines[end:]...)...)
	}
	return []byte(strings.Join(lines, "\n")), nil
}
