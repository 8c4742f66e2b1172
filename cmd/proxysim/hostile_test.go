package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// Each file under scenarios/testdata/hostile starts with
//
//	# want: exit=2 at=LINE:COL FIELD   (the first problem reported)
//	# want: exit=3 cause=TEXT          (a budget ran out; the message names it)
//
// and must end, quickly, with exactly that.
func TestHostileScenarios(t *testing.T) {
	files, _ := filepath.Glob("../../scenarios/testdata/hostile/*.yaml")
	if len(files) < 25 {
		t.Fatalf("%d hostile files; want at least 25", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			want := hostileWant(t, f)
			code, out, errs := runCLI("replay", f)
			if strconv.Itoa(code) != want["exit"] {
				t.Fatalf("exit %d, want %s\nstdout:\n%s\nstderr:\n%s", code, want["exit"], out, errs)
			}
			switch code {
			case exitInvalid:
				first, _, _ := strings.Cut(errs, "\n")
				prefix := f + ":" + want["at"] + ": " + want["field"] + ":"
				if !strings.HasPrefix(first, prefix) {
					t.Fatalf("first problem:\n got  %s\n want %s ...\nall:\n%s", first, prefix, errs)
				}
				if out != "" {
					t.Fatalf("something ran:\n%s", out)
				}
			case exitCannotRun:
				for _, w := range []string{"replay stopped at", "likely cause: " + want["cause"]} {
					if !strings.Contains(out, w) {
						t.Fatalf("output lacks %q:\n%s", w, out)
					}
				}
			}
		})
	}
}

func hostileWant(t *testing.T, file string) map[string]string {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Scan()
	line, ok := strings.CutPrefix(sc.Text(), "# want: ")
	if !ok {
		t.Fatalf("%s: first line must be '# want: exit=N ...'", file)
	}
	want := map[string]string{}
	exit, rest, _ := strings.Cut(line, " ")
	want["exit"] = strings.TrimPrefix(exit, "exit=")
	switch {
	case strings.HasPrefix(rest, "at="):
		at, field, _ := strings.Cut(strings.TrimPrefix(rest, "at="), " ")
		want["at"], want["field"] = at, field
	case strings.HasPrefix(rest, "cause="):
		want["cause"] = strings.TrimPrefix(rest, "cause=")
	default:
		t.Fatalf("%s: want 'exit=2 at=LINE:COL FIELD' or 'exit=3 cause=TEXT'", file)
	}
	return want
}

// hostileFolder is a scenario folder with a file outside it, the victim.
func hostileFolder(t *testing.T) (dir, victim string) {
	t.Helper()
	root := t.TempDir()
	dir = filepath.Join(root, "scenario")
	outside := filepath.Join(root, "outside")
	for _, d := range []string{dir, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	victim = filepath.Join(outside, "precious.txt")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, victim
}

func writeScenario(t *testing.T, dir, name, expect string) string {
	t.Helper()
	f := filepath.Join(dir, name)
	src := "name: u\nproxy: {version: v1.34.0}\ntimeline:\n  - at: 1s\n    expect: {" + expect + "}\n"
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func unchanged(t *testing.T, victim string) {
	t.Helper()
	if b, err := os.ReadFile(victim); err != nil || string(b) != "precious\n" {
		t.Fatalf("the file outside the scenario's folder changed: %q %v", b, err)
	}
}

// The reproduction of the security report: a golden named outside the
// folder, and --update, must not write there.
func TestUpdateNeverWritesOutsideTheFolder(t *testing.T) {
	dir, victim := hostileFolder(t)
	if err := os.Symlink("../outside/precious.txt", filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"../outside/precious.txt", victim, "link.txt"} {
		f := writeScenario(t, dir, "u.yaml", "ipvsFile: "+ref)
		code, out, errs := runCLI("replay", "--update", f)
		if code != exitInvalid || !strings.Contains(errs, f+":5:24: timeline[0].expect.ipvsFile:") || !strings.Contains(errs, "outside the scenario's folder") {
			t.Errorf("ipvsFile %s: exit %d\n%s%s", ref, code, out, errs)
		}
		unchanged(t, victim)
	}
}

// A golden inside the folder is rewritten atomically: the new content, the
// old mode, and no temporary file left beside it.
func TestUpdateRewritesAGoldenInsideTheFolder(t *testing.T) {
	dir, _ := hostileFolder(t)
	golden := filepath.Join(dir, "want.txt")
	if err := os.WriteFile(golden, []byte("stale\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := writeScenario(t, dir, "u.yaml", "ipvsFile: want.txt")
	if code, out, errs := runCLI("replay", "--update", f); code != exitPass {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	b, _ := os.ReadFile(golden)
	if !strings.HasPrefix(string(b), "Prot LocalAddress:Port") {
		t.Fatalf("golden not rewritten: %q", b)
	}
	if fi, _ := os.Stat(golden); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("left behind: %v", entries)
	}
	// A golden that is a symlink, even inside the folder, is not replaced.
	if err := os.Symlink("want.txt", filepath.Join(dir, "alias.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(golden, []byte("stale\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f = writeScenario(t, dir, "u.yaml", "ipvsFile: alias.txt")
	if code, _, _ := runCLI("replay", "--update", f); code != exitCannotRun {
		t.Fatalf("--update through a symlink: exit %d, want %d", code, exitCannotRun)
	}
	if b, _ := os.ReadFile(golden); string(b) != "stale\n" {
		t.Fatalf("written through a symlink: %q", b)
	}
}

// Files made at test time: a symlink out of the folder, a named pipe, a
// device, an oversized file. Each is refused without being read: the test
// ends at once even though the pipe has no writer and the device no end.
func TestReferencesToSpecialFilesAreRefused(t *testing.T) {
	dir, _ := hostileFolder(t)
	mk := func(name string, f func(string) error) {
		if err := f(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	mk("escape.yaml", func(p string) error { return os.Symlink("../outside/precious.txt", p) })
	mk("zero.yaml", func(p string) error { return os.Symlink("/dev/zero", p) })
	mk("pipe.yaml", func(p string) error { return syscall.Mkfifo(p, 0o644) })
	mk("huge.yaml", func(p string) error {
		fh, err := os.Create(p)
		if err != nil {
			return err
		}
		defer fh.Close()
		return fh.Truncate(65 << 20) // sparse: no disk used
	})
	for ref, why := range map[string]string{
		"escape.yaml": "outside the scenario's folder",
		"zero.yaml":   "outside the scenario's folder",
		"pipe.yaml":   "not a regular file (a named pipe)",
		"huge.yaml":   "larger than 64 MiB",
	} {
		src := "name: u\nproxy: {version: v1.34.0}\nobjects:\n  - file: " + ref + "\ntimeline:\n  - at: 1s\n    note: x\n"
		f := filepath.Join(dir, "s.yaml")
		if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		code, out, errs := runCLI("validate", f)
		if code != exitInvalid || !strings.Contains(errs, f+":4:11: objects[0].file: ") || !strings.Contains(errs, why) {
			t.Errorf("file: %s: exit %d\n%s%s", ref, code, out, errs)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("file: %s took %v", ref, d)
		}
	}
	// The scenario named on the command line gets the same treatment.
	if code, _, errs := runCLI("validate", filepath.Join(dir, "pipe.yaml")); code != exitInvalid || !strings.Contains(errs, "named pipe") {
		t.Errorf("a pipe as the scenario: exit %d\n%s", code, errs)
	}
}

// A panic is proxysim's own fault: exit 4 and one line, never Go's exit 2
// and its stack trace.
func TestPanicExitsFourWithOneLine(t *testing.T) {
	root := newRoot(io.Discard, io.Discard)
	root.AddCommand(&cobra.Command{Use: "boom", RunE: func(*cobra.Command, []string) error { panic("index out of range") }})
	var out, errb bytes.Buffer
	code := execute(root, []string{"boom"}, &out, &errb)
	if code != exitInternal {
		t.Fatalf("exit %d, want %d", code, exitInternal)
	}
	if got := errb.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "internal error") || strings.Contains(got, "goroutine") {
		t.Fatalf("stderr:\n%s", got)
	}
}
