package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReportWritesThePageAndExitsAsReplay(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "page.html")
	code, out, errs := runCLI("report", "../../scenarios/testdata/failing/wrong-expectations.yaml", "-o", page)
	if code != exitFail {
		t.Fatalf("code %d, want %d (a failed expectation)\n%s%s", code, exitFail, out, errs)
	}
	for _, want := range []string{"FAIL wrong-expectations", "wrong-expectations.yaml:11:", "syncs.count, at 2s", "wrote " + page} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("<!DOCTYPE html>")) || !bytes.Contains(b, []byte(`class="m check fail"`)) || !bytes.Contains(b, []byte("</html>\n")) {
		t.Errorf("page: %.200s", b)
	}

	// A bundled scenario that passes, to stdout: the same page the file gets.
	code, out, errs = runCLI("report", "cooldown-v1.34", "-o", "-")
	if code != exitPass || !strings.HasPrefix(out, "<!DOCTYPE html>") || !strings.Contains(out, "run deferred (cooldown) until 2s") {
		t.Fatalf("code %d\n%.300s%s", code, out, errs)
	}
	code, _, _ = runCLI("report", "cooldown-v1.34", "-o", page)
	b, _ = os.ReadFile(page)
	if code != exitPass || string(b) != out {
		t.Errorf("the file and stdout pages differ (code %d)", code)
	}
	// Only the page is left in the folder.
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files in the output folder", len(ents))
	}
}

func TestReportRefusesBadInvocations(t *testing.T) {
	for _, args := range [][]string{
		{"report", "cooldown-v1.34"},                                     // no -o
		{"report", "cooldown-v1.34", "-o", "x.html", "--max-marks", "0"}, // no room
		{"report", "cooldown-v1.34", "initial-sync-gating", "-o", "x.html"},
		{"report", "no-such-scenario", "-o", "x.html"},
		{"report", "cooldown-v1.34", "-o", "x.html", "--dataplane", "moon"},
	} {
		if code, out, errs := runCLI(args...); code != exitInvalid {
			t.Errorf("%q: code %d, want %d\n%s%s", args, code, exitInvalid, out, errs)
		}
	}
	if _, err := os.Stat("x.html"); err == nil {
		os.Remove("x.html")
		t.Error("a refused report wrote its page")
	}
}
