package report

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxysim/proxysim/scenarios"
)

// The browser test opens pages in Debian's Chromium, headless (make
// e2e-browser installs it with scenarios/report/browserdeps.sh). Pages and
// screenshots are kept in the repository's artifacts/ folder.
var updateDocs = flag.Bool("update-docs", false, "rewrite docs/report-timeline.png, the report page how-to's picture, from the browser test's screenshot")

// docsScenario is the library scenario docs/how-to/report-page.md's picture shows.
const docsScenario = "sync-cost-v1.34"

func chromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("PROXYSIM_BROWSER_REQUIRED") == "1" {
			t.Fatalf("PROXYSIM_BROWSER_REQUIRED=1 but chromium is not installed (scenarios/report/browserdeps.sh installs it): %v", err)
		}
		t.Skip("chromium is not installed; `make e2e-browser` installs it and runs this test")
	}
	return path
}

func artifacts(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browse runs headless Chromium on a local page with no network and its
// own profile, and returns what it printed (--dump-dom: the DOM after the
// page's script ran).
func browse(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + t.TempDir(),
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--hide-scrollbars"}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	ownGroup(cmd)
	err := cmd.Run()
	killGroup(cmd) // helpers it may have left behind
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// ownGroup starts cmd in a process group of its own, so that killGroup
// reaches the helpers Chromium starts, and nothing else.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

func writePage(t *testing.T, dir, name string, s *scenarios.Scenario) string {
	t.Helper()
	b, _, _ := page(t, s, Config{})
	file := filepath.Join(dir, name)
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func screenshot(t *testing.T, bin, page, png, size string) {
	t.Helper()
	browse(t, bin, "--screenshot="+png, "--window-size="+size, "file://"+page)
	st, err := os.Stat(png)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d KiB)", png, st.Size()>>10)
}

// The failing scenario's page, as the browser draws it: the script redrew
// every lane, the runs as bars, the failed checks in red, and the
// dataplane at the first failure; a link zooms and picks an instant.
func TestPageInChromium(t *testing.T) {
	bin := chromium(t)
	dir := artifacts(t)
	file := writePage(t, dir, "report-failing.html", load(t, failing))

	dom := parse(t, browse(t, bin, "--dump-dom", "--window-size=1280,900", "file://"+file))
	body := dom.all("body")[0]
	if attr(body, "data-drawn") != "js" || attr(dom.byID("marks"), "data-render") != "js" {
		t.Fatalf("the page's script did not draw the timeline (body data-drawn=%q)", attr(body, "data-drawn"))
	}
	want := []string{"scenario · steps", "scenario · checks", "proxy · objects", "proxy · Run() requests", "proxy · runs", "proxy · dataplane"}
	if got := dom.laneNames(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lanes drawn %q, want %q", got, want)
	}
	if n := len(dom.all("rect", "m", "bar", "run")); n != 4 {
		t.Errorf("%d run bars drawn, want 4", n)
	}
	if n := len(dom.all("path", "m", "check", "fail")); n != 8 {
		t.Errorf("%d failed checks drawn, want 8", n)
	}
	if n := len(dom.all("line", "failline")); n != 8 {
		t.Errorf("%d red lines drawn, want 8", n)
	}
	if got := text(dom.byID("range")); got != "0s – 3s (3s shown)" {
		t.Errorf("range %q", got)
	}
	// The first failure is at 1.5s; the latest snapshot then is run 4's,
	// which deleted 10.244.3.4.
	if got := text(dom.byID("snapwhy")); got != "snapshot 5 of 5: after run 4, at 1.2s" {
		t.Errorf("snapshot panel says %q", got)
	}
	if dels := dom.all("span", "del"); len(dels) == 0 || !strings.Contains(text(dels[0]), "10.244.3.4:8080") {
		t.Errorf("the removed real server is not shown")
	}
	t.Logf("first draw took %s ms in the browser", attr(body, "data-render-ms"))
	t.Logf("page: %s", file)

	// Zoomed to 1s–1.3s at 1.15s: three runs, no failed check in view,
	// the dataplane after run 3 with 10.244.3.4 back.
	dom = parse(t, browse(t, bin, "--dump-dom", "--window-size=1280,900", "file://"+file+"#from=1s&to=1.3s&at=1.15s"))
	if got := text(dom.byID("range")); got != "1s – 1.3s (300ms shown)" {
		t.Errorf("zoomed range %q", got)
	}
	if n, f := len(dom.all("rect", "m", "bar", "run")), len(dom.all("path", "check", "fail")); n != 3 || f != 0 {
		t.Errorf("zoomed: %d run bars, %d failed checks drawn; want 3 and 0", n, f)
	}
	if got := text(dom.byID("snapwhy")); got != "snapshot 4 of 5: after run 3, at 1.1s" || !strings.Contains(text(dom.byID("snaptext")), "10.244.3.4:8080") {
		t.Errorf("snapshot at 1.15s: %q\n%s", got, text(dom.byID("snaptext")))
	}

	screenshot(t, bin, file, filepath.Join(dir, "report-failing.png"), "1280,900")
}

// The docs' picture (docs/how-to/report-page.md): a library scenario's page (updated with
// -update-docs), drawn by the browser as that page describes it.
func TestLibraryPageScreenshot(t *testing.T) {
	bin := chromium(t)
	dir := artifacts(t)
	file := writePage(t, dir, "report-timeline.html", load(t, docsScenario))

	dom := parse(t, browse(t, bin, "--dump-dom", "--window-size=1200,560", "file://"+file+"#at=3.2s"))
	body := dom.all("body")[0]
	if attr(body, "data-drawn") != "js" || attr(dom.byID("marks"), "data-render") != "js" {
		t.Fatalf("the page's script did not draw the timeline (body data-drawn=%q)", attr(body, "data-drawn"))
	}
	want := []string{"scenario · steps", "scenario · checks", "proxy · objects", "proxy · Run() requests", "proxy · deferrals", "proxy · runs", "proxy · dataplane"}
	if got := dom.laneNames(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lanes drawn %q, want %q", got, want)
	}
	// The initial sync and the four runner syncs at 1s, 2.45s, 3.9s and
	// 5.35s; both checks pass.
	if bars, fails, passes := len(dom.all("rect", "m", "bar", "run")), len(dom.all("path", "m", "check", "fail")), len(dom.all("path", "m", "check", "pass")); bars != 5 || fails != 0 || passes != 2 {
		t.Errorf("%d run bars, %d failed and %d passed checks drawn; want 5, 0 and 2", bars, fails, passes)
	}
	if got := text(dom.byID("range")); got != "0s – 6s (6s shown)" {
		t.Errorf("range %q", got)
	}
	// The cursor at 3.2s: the latest dataplane change before it is run 2's
	// (the sync at 1s, which ended at 1.45s); the run at 2.45s
	// left the dataplane as it was, so it has no snapshot of its own.
	if got := text(dom.byID("snapwhy")); got != "snapshot 3 of 4: after run 2, at 1.45s" {
		t.Errorf("snapshot panel says %q", got)
	}

	png := filepath.Join(dir, "report-timeline.png")
	screenshot(t, bin, file+"#at=3.2s", png, "1200,560")
	b, err := os.ReadFile(png)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG")) || len(b) > 150<<10 {
		t.Fatalf("screenshot: %d bytes, want a PNG under 150 KiB", len(b))
	}
	if *updateDocs {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "report-timeline.png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("updated docs/report-timeline.png")
	}
}

// An hour of churn at 10 changes a second in the browser: the whole hour
// drawn as counts per column, a two-second window as single events.
func TestHourOfChurnInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("an hour of churn takes seconds to replay")
	}
	bin := chromium(t)
	dir := artifacts(t)
	file := writePage(t, dir, "report-hour-of-churn.html", hourOfChurn(t, "ipvs"))
	st, _ := os.Stat(file)

	start := time.Now()
	dom := parse(t, browse(t, bin, "--dump-dom", "--window-size=1280,900", "file://"+file))
	wall := time.Since(start)
	body := dom.all("body")[0]
	if attr(body, "data-drawn") != "js" {
		t.Fatal("the script did not draw the hour")
	}
	cols := len(dom.all("rect", "agg"))
	if cols == 0 || len(dom.all("rect", "bar")) != 0 {
		t.Errorf("the whole hour: %d columns, %d bars drawn", cols, len(dom.all("rect", "bar")))
	}
	ms, _ := strconv.ParseFloat(attr(body, "data-render-ms"), 64)
	t.Logf("page %d KiB: Chromium loaded and drew it in %v (first draw %.1f ms), %d columns", st.Size()>>10, wall.Round(time.Millisecond), ms, cols)

	dom = parse(t, browse(t, bin, "--dump-dom", "--window-size=1280,900", "file://"+file+"#from=30m&to=30m2s"))
	bars, ticks := len(dom.all("rect", "m", "bar", "run")), len(dom.all("rect", "m", "tick", "dp"))
	if bars != 21 || ticks != 21 || len(dom.all("rect", "agg")) != 0 {
		t.Errorf("two seconds of the hour: %d run bars and %d dataplane ticks, want 21 each (a flip every 100ms, both ends in view)", bars, ticks)
	}
	t.Logf("two seconds at 30m: first draw %s ms", attr(dom.all("body")[0], "data-render-ms"))
	screenshot(t, bin, file, filepath.Join(dir, "report-hour-of-churn.png"), "1280,700")
}
