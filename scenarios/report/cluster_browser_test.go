package report

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// A cluster's page in Chromium: reloaded with a listener for errors and
// console.error installed before the page's own script, it draws the
// timeline and the cluster section with none, and loads nothing.
func TestClusterPageInChromium(t *testing.T) {
	bin := chromium(t)
	file := writePage(t, artifacts(t), "report-cluster.html", load(t, clusterScenario))
	d := openDevtools(t, bin, "file://"+file)

	d.call("Page.enable", map[string]any{})
	d.call("Page.addScriptToEvaluateOnNewDocument", map[string]any{"source": `window.__errors = [];
addEventListener("error", e => __errors.push("error: " + e.message));
addEventListener("unhandledrejection", e => __errors.push("rejection: " + e.reason));
const consoleError = console.error;
console.error = (...a) => { __errors.push("console.error: " + a.join(" ")); consoleError(...a); };`})
	d.call("Page.reload", map[string]any{"ignoreCache": true})
	drawn := false
	for i := 0; i < 100 && !drawn; i++ {
		res, err := d.try("Runtime.evaluate", map[string]any{"expression": "window.__errors !== undefined && document.readyState === 'complete' && document.body.dataset.drawn", "returnByValue": true})
		drawn = err == nil && strings.Contains(string(res), `"value":"js"`)
		if !drawn {
			time.Sleep(50 * time.Millisecond) // the reload, in real time
		}
	}
	if !drawn {
		t.Fatal("after the reload, the page's script never drew the timeline")
	}
	if got := d.eval("window.__errors"); got != "[]" {
		t.Errorf("errors on the cluster page: %s", got)
	}
	if got := d.eval("performance.getEntriesByType('resource').length"); got != "0" {
		t.Errorf("the page loaded %s resources", got)
	}
	// The section is laid out: both charts have a size, the heat map a
	// row per node and its mean, the chart three lines, the table 12 rows.
	var sizes [][2]float64
	json.Unmarshal([]byte(d.eval("['sli', 'heat'].map(id => { const r = document.getElementById(id).getBoundingClientRect(); return [r.width, r.height]; })")), &sizes)
	if len(sizes) != 2 || sizes[0][0] < 500 || sizes[0][1] < 100 || sizes[1][0] < 500 || sizes[1][1] < 100 {
		t.Errorf("charts drawn at %v", sizes)
	}
	counts := d.eval("[document.querySelectorAll('#heat g.hrow').length, document.querySelectorAll('#sli path.series').length, document.querySelectorAll('#nodes tbody tr').length, document.querySelectorAll('#heat path').length]")
	var n []int
	json.Unmarshal([]byte(counts), &n)
	if len(n) != 4 || n[0] != 13 || n[1] != 3 || n[2] != 12 || n[3] < 12 {
		t.Errorf("cluster section: [heat rows, lines, table rows, heat paths] = %s, want [13, 3, 12, at least 12]", counts)
	}
	// A heat cell's colour comes from the page's style (not the default
	// black fill).
	if got := d.eval("getComputedStyle(document.querySelector('#heat path')).fill"); got == `"rgb(0, 0, 0)"` || got == `""` {
		t.Errorf("heat cells filled %s", got)
	}
	d.eval("document.getElementById('cluster').scrollIntoView()")
	shot := d.call("Page.captureScreenshot", map[string]any{"format": "png"})
	var img struct {
		Data []byte `json:"data"`
	}
	if err := json.Unmarshal(shot, &img); err != nil || len(img.Data) == 0 {
		t.Fatalf("screenshot: %v", err)
	}
	png := artifacts(t) + "/report-cluster.png"
	writeFile(t, png, img.Data)
	t.Logf("page %s, the cluster section: %s", file, png)
}

func writeFile(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
