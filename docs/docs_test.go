package docs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysim/proxysim/scenarios"
	_ "github.com/proxysim/proxysim/scenarios/controllers"
	_ "github.com/proxysim/proxysim/scenarios/ingressnginx"
	_ "github.com/proxysim/proxysim/scenarios/iptablesmode"
	_ "github.com/proxysim/proxysim/scenarios/ipvsmode"
	_ "github.com/proxysim/proxysim/scenarios/nftablesmode"
)

// root is the repository, seen from this package's folder.
const root = ".."

// A block is one fenced code block of a page.
type block struct {
	line    int      // of the opening fence, 1-based
	end     int      // of the closing fence
	info    string   // the info string's first word
	body    []string // the lines between the fences, the fence's indent removed
	markers []string // docs-test markers right before it
}

// A page is one Markdown file.
type page struct {
	file    string // relative to root, slash-separated
	text    string // with code blocks blanked out, lines kept
	blocks  []block
	anchors map[string]bool
	errs    []string // problems found while parsing
}

var (
	fenceRE   = regexp.MustCompile("^( *)(`{3,}|~{3,})\\s*([^`\\s]*)")
	markerRE  = regexp.MustCompile(`^\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*$`)
	headingRE = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlIDRE  = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// pages reads README.md and every Markdown file under docs/.
func pages(t *testing.T) map[string]*page {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*page{}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		out[f] = parsePage(f, string(data))
	}
	return out
}

func parsePage(file, data string) *page {
	p := &page{file: file, anchors: map[string]bool{}}
	lines := strings.Split(data, "\n")
	text := make([]string, len(lines))
	seen := map[string]int{}
	var pending []string
	pendingLine := 0
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if m := markerRE.FindStringSubmatch(l); m != nil {
			if len(pending) == 0 {
				pendingLine = i + 1
			}
			pending = append(pending, m[1])
			continue
		}
		if m := fenceRE.FindStringSubmatch(l); m != nil {
			indent, fence := len(m[1]), m[2]
			b := block{line: i + 1, info: m[3], markers: pending}
			pending = nil
			j := i + 1
			for ; j < len(lines); j++ {
				c := strings.TrimSpace(lines[j])
				if strings.HasPrefix(c, fence) && strings.Trim(c, fence[:1]) == "" {
					break
				}
				body := lines[j]
				for k := 0; k < indent && strings.HasPrefix(body, " "); k++ {
					body = body[1:]
				}
				b.body = append(b.body, body)
			}
			b.end = j + 1
			p.blocks = append(p.blocks, b)
			i = j
			continue
		}
		if strings.TrimSpace(l) != "" && len(pending) > 0 {
			p.errs = append(p.errs, fmt.Sprintf("%s:%d: docs-test marker not followed by a fenced block", file, pendingLine))
			pending = nil
		}
		text[i] = l
		if m := headingRE.FindStringSubmatch(l); m != nil {
			slug := githubSlug(m[2])
			if n, ok := seen[slug]; ok {
				seen[slug] = n + 1
				slug = fmt.Sprintf("%s-%d", slug, n+1)
			} else {
				seen[slug] = 0
			}
			p.anchors[slug] = true
		}
		for _, m := range htmlIDRE.FindAllStringSubmatch(l, -1) {
			p.anchors[m[1]] = true
		}
	}
	if len(pending) > 0 {
		p.errs = append(p.errs, fmt.Sprintf("%s:%d: docs-test marker not followed by a fenced block", file, pendingLine))
	}
	p.text = strings.Join(text, "\n")
	return p
}

var (
	mdLinkRE   = regexp.MustCompile(`!?\[([^\]]*)\]\(([^)]*)\)`)
	mdImageRE  = regexp.MustCompile(`!\[[^\]]*\]\([^)]*\)`)
	mdSymbolRE = regexp.MustCompile("[*`]")
)

// githubSlug is the anchor GitHub gives a heading: its text as rendered
// (link targets and emphasis gone), lower-cased, every character that is
// not a letter, a digit, '_', '-' or a space dropped, spaces made hyphens.
func githubSlug(heading string) string {
	h := mdImageRE.ReplaceAllString(heading, "")
	h = mdLinkRE.ReplaceAllString(h, "$1")
	h = mdSymbolRE.ReplaceAllString(h, "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r), unicode.IsNumber(r), r == '_', r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func TestGitHubSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Fidelity: what is checked, and where we differ from upstream": "fidelity-what-is-checked-and-where-we-differ-from-upstream",
		"kube-proxy's IPVS proxier side by side":                       "kube-proxys-ipvs-proxier-side-by-side",
		"The `proxy` section":                                          "the-proxy-section",
		"Seeing a replay: the timeline page":                           "seeing-a-replay-the-timeline-page",
		"[Links](x.md) and **bold**":                                   "links-and-bold",
		"snake_case and 1.2.3":                                         "snake_case-and-123",
	} {
		if got := githubSlug(heading); got != want {
			t.Errorf("githubSlug(%q) = %q, want %q", heading, got, want)
		}
	}
	p := parsePage("x.md", "# A\n\n## A\n\n```sh\n# not a heading\n```\n## A\n")
	for _, a := range []string{"a", "a-1", "a-2"} {
		if !p.anchors[a] {
			t.Errorf("duplicate headings: no anchor %q in %v", a, p.anchors)
		}
	}
	if p.anchors["not-a-heading"] {
		t.Error("a comment inside a code block became an anchor")
	}
}

var (
	inlineCodeRE = regexp.MustCompile("`[^`]*`")
	linkRE       = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDefRE     = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*(\S+)`)
	schemeRE     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// TestLinks checks every relative link of README.md and docs/**/*.md: the
// file (or folder) exists inside the repository and, for a Markdown file,
// the #anchor is one of its headings.
func TestLinks(t *testing.T) {
	all := pages(t)
	checked := 0
	for _, name := range sortedKeys(all) {
		p := all[name]
		for _, e := range p.errs {
			t.Error(e)
		}
		// Inline code is not a link; blank it, keeping line numbers.
		text := inlineCodeRE.ReplaceAllStringFunc(p.text, func(s string) string {
			return strings.Repeat("\n", strings.Count(s, "\n"))
		})
		var targets [][]int
		targets = append(targets, linkRE.FindAllStringSubmatchIndex(text, -1)...)
		targets = append(targets, refDefRE.FindAllStringSubmatchIndex(text, -1)...)
		for _, m := range targets {
			target := text[m[2]:m[3]]
			line := 1 + strings.Count(text[:m[0]], "\n")
			if schemeRE.MatchString(target) {
				continue
			}
			checked++
			if err := checkLink(all, name, target); err != nil {
				t.Errorf("%s:%d: link %s: %v", name, line, target, err)
			}
		}
	}
	if checked < 100 {
		t.Errorf("only %d relative links checked: the link scanner is broken", checked)
	}
	t.Logf("%d relative links in %d pages resolve", checked, len(all))
}

func checkLink(all map[string]*page, from, target string) error {
	pathPart, anchor, _ := strings.Cut(target, "#")
	pathPart, err := url.PathUnescape(pathPart)
	if err != nil {
		return err
	}
	to := from
	if pathPart != "" {
		to = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(from), pathPart)))
		if to == ".." || strings.HasPrefix(to, "../") {
			return errors.New("leads outside the repository")
		}
		if _, err := os.Stat(filepath.Join(root, to)); err != nil {
			return fmt.Errorf("no such file (%s)", to)
		}
	}
	if anchor == "" {
		return nil
	}
	p, ok := all[to]
	if !ok {
		if strings.HasSuffix(to, ".md") {
			return fmt.Errorf("%s is not a page this test reads, so #%s cannot be checked", to, anchor)
		}
		return fmt.Errorf("#%s on %s, which is not a Markdown page", anchor, to)
	}
	if !p.anchors[anchor] {
		return fmt.Errorf("%s has no heading with the anchor #%s", to, anchor)
	}
	return nil
}

// shells are the info strings of blocks holding shell commands.
var shells = map[string]bool{"sh": true, "shell": true, "bash": true, "console": true}

// A command is one command line of a shell block, with what it must do.
type command struct {
	line   int // in the page
	text   string
	exit   int
	output []string // console blocks: the lines shown after it
}

var (
	exitRE  = regexp.MustCompile(`#\s*exit\s+(\d+)\b`)
	envRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=\S*$`)
	wallRE  = regexp.MustCompile(`virtual in [0-9.]+[a-zµ]+(?:[0-9.]+[a-zµ]+)*`)
	goRunRE = regexp.MustCompile(`(^|\s)go run \./cmd/proxysim(\s|$)`)
)

// commands splits a shell block into its commands: lines joined at a
// trailing backslash; in a console block, only "$ " lines are commands and
// the lines after one are its output.
func commands(b block) []command {
	var out []command
	console := b.info == "console"
	for i := 0; i < len(b.body); i++ {
		l := b.body[i]
		trimmed := strings.TrimSpace(l)
		if console {
			if !strings.HasPrefix(trimmed, "$ ") {
				if len(out) > 0 {
					out[len(out)-1].output = append(out[len(out)-1].output, l)
				}
				continue
			}
			trimmed = strings.TrimPrefix(trimmed, "$ ")
		} else if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		c := command{line: b.line + 1 + i}
		for strings.HasSuffix(trimmed, `\`) && i+1 < len(b.body) {
			i++
			trimmed = strings.TrimSuffix(trimmed, `\`) + " " + strings.TrimSpace(b.body[i])
		}
		if m := exitRE.FindStringSubmatch(trimmed); m != nil {
			c.exit, _ = strconv.Atoi(m[1])
		}
		c.text = goRunRE.ReplaceAllString(trimmed, "${1}proxysim${2}")
		out = append(out, c)
	}
	return out
}

// runsProxysim says whether a command line runs proxysim (after any
// VAR=value assignments).
func runsProxysim(c string) bool {
	for _, w := range strings.Fields(c) {
		if envRE.MatchString(w) {
			continue
		}
		return w == "proxysim" || strings.HasSuffix(w, "/proxysim")
	}
	return false
}

func marker(b block, kind string) (string, bool) {
	for _, m := range b.markers {
		k, rest, _ := strings.Cut(m, ":")
		if strings.TrimSpace(k) == kind {
			return strings.TrimSpace(rest), true
		}
		if f := strings.Fields(m); len(f) > 0 && f[0] == kind {
			return strings.TrimSpace(strings.TrimPrefix(m, kind)), true
		}
	}
	return "", false
}

// TestCommandBlocks runs every shell block of the docs that shows a
// proxysim command, from a copy of the repository, with proxysim built from
// this tree, and checks each command's exit code and the output shown.
func TestCommandBlocks(t *testing.T) {
	start := time.Now()
	all := pages(t)
	bin := buildProxysim(t)
	t.Logf("built proxysim in %v", time.Since(start).Round(time.Millisecond))
	ran, skipped := 0, 0
	for _, name := range sortedKeys(all) {
		p := all[name]
		var work string // this page's copy of the repository, made when needed
		var last *block // the previous command block, and its output
		var lastOut []byte
		for i := range p.blocks {
			b := &p.blocks[i]
			where := fmt.Sprintf("%s:%d", name, b.line)
			for _, m := range b.markers {
				k, _, _ := strings.Cut(m, ":")
				if f := strings.Fields(k); len(f) == 0 || !slices.Contains([]string{"skip", "requires", "fragment", "dir", "file"}, f[0]) {
					t.Errorf("%s: unknown docs-test marker %q", where, m)
				}
			}
			switch {
			case b.info == "output":
				if last == nil || !onlyBlankBetween(p, last.end, b.line) {
					t.Errorf("%s: an output block must follow a command block directly", where)
					continue
				}
				if _, skip := marker(*last, "skip"); skip || lastOut == nil {
					continue
				}
				if err := matchOutput(b.body, string(lastOut)); err != nil {
					t.Errorf("%s: the output shown is not what %s:%d prints: %v", where, name, last.line, err)
				}
				continue
			case shells[b.info]:
			default:
				for j, l := range b.body {
					l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "$ "))
					if strings.HasPrefix(l, "proxysim ") && b.info != "text" {
						t.Errorf("%s:%d: a proxysim command in a block labelled %q: label it sh or console to have it run, or text if it is not a command", name, b.line+1+j, b.info)
						break
					}
				}
				last, lastOut = nil, nil
				continue
			}
			cmds := commands(*b)
			isCommandBlock := slices.ContainsFunc(cmds, func(c command) bool { return runsProxysim(c.text) })
			reason, skip := marker(*b, "skip")
			last, lastOut = b, nil
			if !isCommandBlock {
				if skip {
					t.Errorf("%s: a skip marker on a block that runs no proxysim command (the test would not run it anyway)", where)
				}
				last = nil
				continue
			}
			if need, ok := marker(*b, "requires"); ok && !skip {
				if missing := unmet(need); missing != "" {
					t.Logf("%s: skipped: needs %s (%s)", where, need, missing)
					skipped++
					continue
				}
			}
			if skip {
				if reason == "" {
					t.Errorf("%s: a skip marker must say why the block cannot run in a test", where)
				}
				t.Logf("%s: skipped: %s", where, reason)
				skipped++
				continue
			}
			if work == "" {
				work = copyRepository(t)
			}
			var out bytes.Buffer
			for _, c := range cmds {
				got, code, err := runCommand(work, bin, c.text)
				if err != nil {
					t.Errorf("%s:%d: %s: %v", name, c.line, c.text, err)
					continue
				}
				ran++
				if code != c.exit {
					t.Errorf("%s:%d: `%s` exited %d, the docs say %d; it printed:\n%s", name, c.line, c.text, code, c.exit, tail(got))
				}
				if c.output != nil {
					if err := matchOutput(c.output, string(got)); err != nil {
						t.Errorf("%s:%d: the output shown is not what `%s` prints: %v", name, c.line, c.text, err)
					}
				}
				out.Write(got)
			}
			lastOut = out.Bytes()
		}
	}
	if ran == 0 {
		t.Error("no command ran: the block scanner is broken")
	}
	t.Logf("%d commands run, %d blocks skipped with their reasons, in %v", ran, skipped, time.Since(start).Round(time.Millisecond))
}

// unmet says which of a requires marker's needs this machine lacks: "root"
// is the effective user, any other word a command on the PATH.
func unmet(need string) string {
	var missing []string
	for _, w := range strings.Fields(need) {
		if w == "root" {
			if os.Geteuid() != 0 {
				missing = append(missing, "not root")
			}
			continue
		}
		if _, err := exec.LookPath(w); err != nil {
			missing = append(missing, "no "+w)
		}
	}
	return strings.Join(missing, ", ")
}

func onlyBlankBetween(p *page, from, to int) bool {
	lines := strings.Split(p.text, "\n")
	for i := from; i < to-1 && i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "" {
			return false
		}
	}
	return true
}

// matchOutput compares shown output with the real one, line by line after
// trailing spaces and wall-clock times are normalised; a shown line "..."
// stands for any number of lines.
func matchOutput(shown []string, got string) error {
	norm := func(l string) string { return wallRE.ReplaceAllString(strings.TrimRight(l, " \t"), "virtual in WALL") }
	var want []string
	for _, l := range shown {
		want = append(want, norm(l))
	}
	for len(want) > 0 && want[len(want)-1] == "" {
		want = want[:len(want)-1]
	}
	var have []string
	for _, l := range strings.Split(strings.TrimRight(got, "\n"), "\n") {
		have = append(have, norm(l))
	}
	if globLines(want, have) {
		return nil
	}
	return fmt.Errorf("\nshown:\n%s\nprinted:\n%s", strings.Join(want, "\n"), tail([]byte(strings.Join(have, "\n"))))
}

// globLines matches lines where "..." stands for any run of lines.
func globLines(want, have []string) bool {
	if len(want) == 0 {
		return len(have) == 0
	}
	if strings.TrimSpace(want[0]) == "..." {
		for i := 0; i <= len(have); i++ {
			if globLines(want[1:], have[i:]) {
				return true
			}
		}
		return false
	}
	return len(have) > 0 && lineMatches(want[0], have[0]) && globLines(want[1:], have[1:])
}

// lineMatches compares one line, where "..." inside a shown line stands for
// any text (a kernel's version, a tool's).
func lineMatches(want, have string) bool {
	if !strings.Contains(want, "...") {
		return want == have
	}
	parts := strings.Split(want, "...")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(have)
}

func TestMatchOutput(t *testing.T) {
	got := "PASS a (1 check, 2 syncs, 7s virtual in 13ms, fake dataplane)\nline 2\nline 3\nlast\n"
	for _, ok := range [][]string{
		{"PASS a (1 check, 2 syncs, 7s virtual in 1ms, fake dataplane)", "...", "last"},
		{"PASS a (1 check, 2 syncs, 7s virtual in 1.5s, fake dataplane)", "line 2", "line 3", "last", ""},
		{"...", "line 3", "..."},
		{"PASS a (1 check, ... syncs, 7s virtual in 2s, fake dataplane)", "line ...", "...", "last"},
	} {
		if err := matchOutput(ok, got); err != nil {
			t.Errorf("%q should match: %v", ok, err)
		}
	}
	for _, bad := range [][]string{
		{"PASS a (1 check, 3 syncs, 7s virtual in 1ms, fake dataplane)", "..."},
		{"...", "line 3"},
		{"line 2", "..."},
		{"PASS b (...)", "..."},
	} {
		if matchOutput(bad, got) == nil {
			t.Errorf("%q should not match", bad)
		}
	}
}

func tail(b []byte) string {
	const max = 4000
	if len(b) > max {
		b = append([]byte("…"), b[len(b)-max:]...)
	}
	return string(b)
}

// buildProxysim builds the CLI from this tree, once.
func buildProxysim(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "proxysim"), "./cmd/proxysim")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building proxysim: %v\n%s", err, out)
	}
	return dir
}

// copyRepository copies the repository's files (tracked, and new ones not
// ignored) into a temporary folder, so that commands writing files (-o
// page.html) leave the tree alone, while every path the docs name resolves
// as it does from the repository's root.
func copyRepository(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	for _, f := range repositoryFiles(t) {
		src := filepath.Join(root, f)
		fi, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dst, f)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			link, err := os.Readlink(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(link, to); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		if err := copyFile(src, to, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// repositoryFiles lists the files git knows (tracked, and new ones not
// ignored); without git (a tarball), every file but hidden folders and
// build output.
func repositoryFiles(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err == nil {
		return strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	}
	var files []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && rel != "." && (strings.HasPrefix(d.Name(), ".") || rel == "bin" || rel == "artifacts") {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// runCommand runs one command line with bash in dir, proxysim first on the
// PATH, and returns what it printed (stdout and stderr in order) and its
// exit code.
func runCommand(dir, bin, line string) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", line)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		return out.Bytes(), -1, fmt.Errorf("still running after 2 minutes")
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.Bytes(), ee.ExitCode(), nil
	}
	if err != nil {
		return nil, 0, err
	}
	return out.Bytes(), 0, nil
}

// TestYAMLSnippets loads every YAML block of the docs with the scenario
// loader, unless it is marked as a fragment of a scenario.
func TestYAMLSnippets(t *testing.T) {
	all := pages(t)
	loaded, fragments := 0, 0
	for _, name := range sortedKeys(all) {
		for _, b := range all[name].blocks {
			if b.info != "yaml" && b.info != "yml" {
				continue
			}
			where := fmt.Sprintf("%s:%d", name, b.line)
			if _, ok := marker(b, "fragment"); ok {
				fragments++
				continue
			}
			body := strings.Join(b.body, "\n") + "\n"
			if f, ok := marker(b, "file"); ok {
				// The block shows a file of the repository: it must be that
				// file, and that file must load.
				data, err := os.ReadFile(filepath.Join(root, f))
				if err != nil {
					t.Errorf("%s: %v", where, err)
					continue
				}
				if string(data) != body {
					t.Errorf("%s: the block is not %s as it is now (-shown +file):\n%s", where, f, cmp.Diff(strings.Split(body, "\n"), strings.Split(string(data), "\n")))
				}
				if _, err := scenarios.Load(filepath.Join(root, f)); err != nil {
					t.Errorf("%s: %s does not load:\n%v", where, f, err)
				}
				loaded++
				continue
			}
			var dir fs.FS
			if d, ok := marker(b, "dir"); ok {
				dir = os.DirFS(filepath.Join(root, d))
			}
			// Blank lines in front make the loader's line numbers the page's.
			data := strings.Repeat("\n", b.line) + body
			if _, err := scenarios.Parse(name, []byte(data), dir); err != nil {
				t.Errorf("%s: the scenario does not load (mark it <!-- docs-test: fragment --> if it is only part of one):\n%v", where, err)
				continue
			}
			loaded++
		}
	}
	if loaded == 0 {
		t.Error("no YAML scenario in the docs was loaded: the block scanner is broken")
	}
	t.Logf("%d YAML scenarios loaded, %d fragments", loaded, fragments)
}

// firstDiff shows the first line where two texts differ.

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
