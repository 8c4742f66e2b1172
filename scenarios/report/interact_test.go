package report

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// devtools drives a headless Chromium through the DevTools protocol over
// its pipe (--remote-debugging-pipe: fd 3 in, fd 4 out, messages ended by
// a NUL byte): no port, no network.
type devtools struct {
	t       *testing.T
	in      io.Writer
	out     *bufio.Reader
	id      int
	session string
}

func (d *devtools) call(method string, params any) json.RawMessage {
	d.t.Helper()
	res, err := d.try(method, params)
	if err != nil {
		d.t.Fatalf("%s: %v", method, err)
	}
	return res
}

// try is call, returning the protocol's error.
func (d *devtools) try(method string, params any) (json.RawMessage, error) {
	d.t.Helper()
	d.id++
	msg := map[string]any{"id": d.id, "method": method, "params": params}
	if d.session != "" {
		msg["sessionId"] = d.session
	}
	b, err := json.Marshal(msg)
	if err != nil {
		d.t.Fatal(err)
	}
	if _, err := d.in.Write(append(b, 0)); err != nil {
		d.t.Fatalf("%s: %v", method, err)
	}
	for {
		raw, err := d.out.ReadBytes(0)
		if err != nil {
			d.t.Fatalf("%s: reading the reply: %v", method, err)
		}
		var reply struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(raw[:len(raw)-1], &reply); err != nil {
			d.t.Fatal(err)
		}
		if reply.ID != d.id {
			continue // an event, or another call's reply
		}
		if reply.Error != nil {
			return nil, fmt.Errorf("%s", reply.Error.Message)
		}
		return reply.Result, nil
	}
}

// eval runs a script in the page after two animation frames (the
// timeline redraws on the next one) and returns its value as JSON.
func (d *devtools) eval(expr string) string {
	d.t.Helper()
	res := d.call("Runtime.evaluate", map[string]any{
		"expression":    "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))).then(() => JSON.stringify(" + expr + "))",
		"awaitPromise":  true,
		"returnByValue": true,
	})
	var v struct {
		Result struct {
			Value string `json:"value"`
		} `json:"result"`
		ExceptionDetails any `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(res, &v); err != nil || v.ExceptionDetails != nil {
		d.t.Fatalf("%s: %v %v", expr, err, v.ExceptionDetails)
	}
	return v.Result.Value
}

func (d *devtools) text(id string) string {
	var s string
	json.Unmarshal([]byte(d.eval("document.getElementById('"+id+"').textContent")), &s)
	return s
}

// center is where an element is on the screen, scrolled into view.
func (d *devtools) center(selector string) (float64, float64) {
	d.t.Helper()
	var xy []float64
	json.Unmarshal([]byte(d.eval("(() => { const e = document.querySelector('"+selector+"'); e.scrollIntoView({block: 'nearest'}); const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")), &xy)
	if len(xy) != 2 {
		d.t.Fatalf("no %s on the page", selector)
	}
	return xy[0], xy[1]
}

// near checks the view shown is [from, to], within a pixel.
func (d *devtools) near(what string, from, to time.Duration) {
	d.t.Helper()
	got := d.text("range")
	a, rest, _ := strings.Cut(got, " – ")
	b, _, _ := strings.Cut(rest, " (")
	ga, err1 := time.ParseDuration(a)
	gb, err2 := time.ParseDuration(b)
	px := (to - from) / 500
	if err1 != nil || err2 != nil || (ga-from).Abs() > px || (gb-to).Abs() > px {
		d.t.Errorf("%s: shown %q, want %v – %v", what, got, from, to)
	}
}

func (d *devtools) mouse(typ string, x, y float64, extra map[string]any) {
	p := map[string]any{"type": typ, "x": x, "y": y}
	for k, v := range extra {
		p[k] = v
	}
	d.call("Input.dispatchMouseEvent", p)
}

func (d *devtools) click(x, y float64) {
	d.mouse("mousePressed", x, y, map[string]any{"button": "left", "buttons": 1, "clickCount": 1})
	d.mouse("mouseReleased", x, y, map[string]any{"button": "left", "buttons": 0, "clickCount": 1})
}

// openDevtools starts Chromium on a page and attaches to it.
func openDevtools(t *testing.T, bin, url string) *devtools {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	toChrome, cmdIn, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmdOut, fromChrome, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir="+t.TempDir(),
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--hide-scrollbars", "--window-size=1280,900",
		"--remote-debugging-pipe", url)
	cmd.ExtraFiles = []*os.File{toChrome, fromChrome} // fds 3 and 4
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	toChrome.Close()
	fromChrome.Close()
	d := &devtools{t: t, in: cmdIn, out: bufio.NewReader(cmdOut)}
	// Close the browser politely, so its helpers are gone before the
	// profile folder is removed; kill what is left of its group.
	t.Cleanup(func() {
		d.session = ""
		d.try("Browser.close", map[string]any{})
		cmdIn.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cancel()
			<-done
		}
		cancel()
		killGroup(cmd)
		cmdOut.Close()
	})
	var page string
	for i := 0; i < 100 && page == ""; i++ {
		var targets struct {
			TargetInfos []struct {
				TargetID string `json:"targetId"`
				Type     string `json:"type"`
				URL      string `json:"url"`
			} `json:"targetInfos"`
		}
		json.Unmarshal(d.call("Target.getTargets", map[string]any{}), &targets)
		for _, ti := range targets.TargetInfos {
			if ti.Type == "page" && strings.HasPrefix(ti.URL, "file://") {
				page = ti.TargetID
			}
		}
		if page == "" {
			time.Sleep(50 * time.Millisecond) // the browser opening its first tab, in real time
		}
	}
	if page == "" {
		t.Fatal("Chromium opened no page")
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(d.call("Target.attachToTarget", map[string]any{"targetId": page, "flatten": true}), &att)
	d.session = att.SessionID
	// Wait for the page's script to have drawn (the tab may still be
	// loading it: its context then goes away under the call).
	for i := 0; i < 100; i++ {
		res, err := d.try("Runtime.evaluate", map[string]any{"expression": "document.body && document.body.dataset.drawn", "returnByValue": true})
		if err == nil && strings.Contains(string(res), `"value":"js"`) {
			return d
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the page's script never drew the timeline")
	return nil
}

// Zoom with the wheel, pan by dragging, the buttons, hover and click, as
// a person would, on the failing scenario's page (3s of replay).
func TestPageInteractionInChromium(t *testing.T) {
	bin := chromium(t)
	file := writePage(t, artifacts(t), "report-interaction.html", load(t, failing))
	d := openDevtools(t, bin, "file://"+file)

	if got := d.text("range"); got != "0s – 3s (3s shown)" {
		t.Fatalf("range at start %q", got)
	}
	// The wheel zooms in by 0.8 around the pointer: at the 1.5s tick, the
	// view becomes 0.3s to 2.7s.
	if got := d.eval("document.querySelector('#axis text:nth-of-type(4)').textContent"); got != `"1.5s"` {
		t.Fatalf("fourth tick %s", got)
	}
	x, y := d.center("#axis line:nth-of-type(4)")
	y += 40 // on a lane
	d.mouse("mouseWheel", x, y, map[string]any{"deltaX": 0, "deltaY": -120})
	d.near("after a wheel step up at 1.5s", 300*time.Millisecond, 2700*time.Millisecond)
	// Dragging 100 pixels left moves the view later by 100 pixels' time.
	var plotW float64
	json.Unmarshal([]byte(d.eval("document.getElementById('tl').width.baseVal.value - "+fmt.Sprint(labelW+2*pad+right))), &plotW)
	d.mouse("mousePressed", x, y, map[string]any{"button": "left", "buttons": 1, "clickCount": 1})
	for i := 1; i <= 5; i++ {
		d.mouse("mouseMoved", x-float64(i)*20, y, map[string]any{"button": "left", "buttons": 1})
	}
	d.mouse("mouseReleased", x-100, y, map[string]any{"button": "left", "buttons": 0, "clickCount": 1})
	shift := time.Duration(100 / plotW * float64(2400*time.Millisecond))
	d.near("after dragging 100 pixels left", 300*time.Millisecond+shift, 2700*time.Millisecond+shift)
	// Past the end, the view stops there.
	d.mouse("mousePressed", x, y, map[string]any{"button": "left", "buttons": 1, "clickCount": 1})
	d.mouse("mouseMoved", x-plotW, y, map[string]any{"button": "left", "buttons": 1})
	d.mouse("mouseReleased", x-plotW, y, map[string]any{"button": "left", "buttons": 0, "clickCount": 1})
	if got := d.text("range"); got != "600ms – 3s (2.4s shown)" {
		t.Errorf("after dragging past the end: %q", got)
	}
	// The buttons: fit, then zoom in (halves the view around its middle).
	d.click(d.center("#fit"))
	d.click(d.center("#zoomin"))
	if got := d.text("range"); got != "750ms – 2.25s (1.5s shown)" {
		t.Errorf("after fit and +: %q", got)
	}
	d.click(d.center("#right"))
	if got := d.text("range"); got != "1.125s – 2.625s (1.5s shown)" {
		t.Errorf("after ▶: %q", got)
	}
	d.click(d.center("#fit"))
	// Hover over run 3's bar: its details.
	bx, by := d.center("rect.bar:nth-of-type(3)")
	d.mouse("mouseMoved", bx, by, nil)
	tip := d.eval("[document.getElementById('tip').hidden, document.getElementById('tip').textContent]")
	if !strings.Contains(tip, `[false,`) || !strings.Contains(tip, "run 3 (request)") || !strings.Contains(tip, "1.1s to 1.1s, cost 0s") {
		t.Errorf("tooltip over run 3: %s", tip)
	}
	// Click there: the dataplane after run 3.
	d.click(bx, by)
	if got := d.text("snapwhy"); got != "snapshot 4 of 5: after run 3, at 1.1s" {
		t.Errorf("after clicking run 3: %q", got)
	}
	if !strings.Contains(d.text("snaptext"), "10.244.3.4:8080") {
		t.Errorf("the dataplane after run 3 lacks the endpoint it added")
	}
	// A failure's link: zoomed around it, the cursor on it.
	d.click(d.center("#failures li:last-child a"))
	if got := d.text("snapat"); got != "3s" {
		t.Errorf("after the last failure's link, cursor at %q", got)
	}
	png := filepath.Join(artifacts(t), "report-interaction.png")
	shot := d.call("Page.captureScreenshot", map[string]any{"format": "png"})
	var img struct {
		Data []byte `json:"data"`
	}
	if err := json.Unmarshal(shot, &img); err != nil || len(img.Data) == 0 {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(png, img.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot after the clicks: %s", png)
}
