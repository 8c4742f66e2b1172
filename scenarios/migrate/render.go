package migrate

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
)

// maxAffected is how many affected connections a difference lists one by
// one in text and HTML (JSON lists them all).
const maxAffected = 6

// Text writes the report for a terminal.
func (r *Report) Text(w io.Writer) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("proxysim migrate: %s -> %s\n", r.From, r.To)
	p("cluster %s, kube-proxy configuration %s\n", r.Cluster, r.Config)
	if len(r.Set) > 0 {
		p("target settings: %s\n", strings.Join(r.Set, ", "))
	}
	p("\nNodes (what the %s mode needs):\n", r.To)
	for _, n := range r.Nodes {
		mark := "ok  "
		if !n.Ready {
			mark = "FAIL"
		}
		p("  %s %s: %s\n", mark, n.Node, n.Why)
		if !n.Ready {
			p("       source: %s\n", strings.Join(n.Cite, "; "))
		}
	}
	p("\nServices:\n")
	for _, s := range r.Services {
		if s.Unchanged {
			p("  %s (%s): unchanged\n", s.Service, s.Type)
			continue
		}
		p("  %s (%s): %d difference%s\n", s.Service, s.Type, len(s.Differences), plural(len(s.Differences)))
		for _, d := range s.Differences {
			p("    - port %s, %s, from %s\n", d.Port, d.Entry, d.Client)
			p("        before (%s): %s\n", r.From, d.Before)
			p("        after (%s): %s\n", r.To, d.After)
			p("        why [%s]: %s\n", d.Rule.ID, d.Rule.Text)
			p("        source: %s\n", strings.Join(d.Rule.Cite, "; "))
			p("        affected: %s\n", affectedText(d.Affected))
			for _, k := range d.Kernel {
				p("        kernel: %s\n", k)
			}
		}
	}
	if r.KernelNote != "" {
		p("\nKernel check: %s\n", r.KernelNote)
	}
	p("\nTiming: %s\n", r.Timing.Note)
	for _, t := range r.Timing.Nodes {
		p("  %s: initial sync %v (%s), %v (%s)\n", t.Node, t.Before, r.From, t.After, r.To)
	}
	p("Not compared: %s.\n", strings.Join(r.NotCompared, "; "))
	if len(r.Warnings) > 0 {
		p("\nWarnings (settings proxysim does not model):\n")
		for _, w := range r.Warnings {
			p("  %s\n", w)
		}
	}
	p("\n%s (exit %d)\n", r.Summary, r.Exit)
	_, err := io.WriteString(w, b.String())
	return err
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func affectedText(as []Affected) string {
	var parts []string
	for i, a := range as {
		if i == maxAffected {
			parts = append(parts, fmt.Sprintf("and %d more", len(as)-maxAffected))
			break
		}
		parts = append(parts, fmt.Sprintf("%s from %s on node %s", a.To, a.From, a.Node))
	}
	return strings.Join(parts, "; ")
}

// JSON writes the report as indented JSON.
func (r *Report) JSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// HTML writes the report as one self-contained page: its style inline,
// nothing fetched.
func (r *Report) HTML(w io.Writer) error {
	return page.Execute(w, r)
}

var page = template.Must(template.New("migrate").Funcs(template.FuncMap{
	"affected": affectedText,
	"join":     strings.Join,
	"plural":   plural,
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>proxysim migrate: {{.From}} to {{.To}}</title>
<style>
body { font: 13px/1.45 "DejaVu Sans", system-ui, sans-serif; margin: 0; color: #1d2330; background: #fff; }
header { padding: 10px 16px 6px; border-bottom: 1px solid #d8dce4; }
h1 { font-size: 17px; margin: 0 0 2px; }
h2 { font-size: 14px; margin: 14px 16px 4px; }
.meta { margin: 0; color: #5a6273; }
.status { padding: 1px 6px; border-radius: 3px; color: #fff; }
.pass { background: #2e7d32; } .fail { background: #c62828; } .warn { background: #ef6c00; }
table { border-collapse: collapse; margin: 0 16px; }
td, th { border-bottom: 1px solid #e4e8ef; padding: 3px 8px; text-align: left; vertical-align: top; }
.svc { margin: 4px 16px; }
.svc summary { cursor: pointer; }
.unchanged { color: #2e7d32; }
.diff { margin: 6px 0 10px 18px; padding: 6px 10px; border-left: 3px solid #c62828; background: #fbf6f6; }
.diff dt { font-weight: bold; } .diff dd { margin: 0 0 4px 12px; }
code, .mono { font-family: "DejaVu Sans Mono", monospace; font-size: 12px; }
.cite { color: #5a6273; }
ul { margin: 2px 16px 10px 34px; padding: 0; }
</style></head><body>
<header>
<h1>Migrating kube-proxy from {{.From}} to {{.To}}
{{if eq .Exit 0}}<span class="status pass">unchanged</span>{{else if eq .Exit 1}}<span class="status warn">differences</span>{{else}}<span class="status fail">nodes not ready</span>{{end}}</h1>
<p class="meta">cluster <code>{{.Cluster}}</code>, kube-proxy configuration <code>{{.Config}}</code>{{if .Set}}, target settings <code>{{join .Set ", "}}</code>{{end}}</p>
<p class="meta">{{.Summary}} (exit {{.Exit}})</p>
</header>
<h2>Nodes: what the {{.To}} mode needs</h2>
<table><tr><th>node</th><th></th><th>kernel</th><th>OS image</th><th>why</th></tr>
{{range .Nodes}}<tr><td>{{.Node}}</td><td>{{if .Ready}}<span class="status pass">ready</span>{{else}}<span class="status fail">not ready</span>{{end}}</td><td class="mono">{{.Kernel}}</td><td>{{.OSImage}}{{if .NFT}} (nft {{.NFT}}){{end}}</td><td>{{.Why}}{{if .Cite}}<br><span class="cite">{{join .Cite "; "}}</span>{{end}}</td></tr>
{{end}}</table>
<h2>Services</h2>
{{range .Services}}{{if .Unchanged}}<div class="svc"><code>{{.Service}}</code> ({{.Type}}): <span class="unchanged">unchanged</span></div>
{{else}}<details class="svc" open><summary><code>{{.Service}}</code> ({{.Type}}): {{len .Differences}} difference{{plural (len .Differences)}}</summary>
{{range .Differences}}<dl class="diff">
<dt>port {{.Port}}, {{.Entry}}, from {{.Client}}</dt>
<dd>before ({{$.From}}): <span class="mono">{{.Before}}</span></dd>
<dd>after ({{$.To}}): <span class="mono">{{.After}}</span></dd>
<dd>why: {{.Rule.Text}}<br><span class="cite">{{join .Rule.Cite "; "}}</span></dd>
<dd>affected: <span class="mono">{{affected .Affected}}</span></dd>
{{range .Kernel}}<dd>kernel: <span class="mono">{{.}}</span></dd>{{end}}
</dl>{{end}}</details>
{{end}}{{end}}
{{if .KernelNote}}<h2>Kernel check</h2>
<p class="svc">{{.KernelNote}}</p>{{end}}
<h2>Timing</h2>
<p class="svc">{{.Timing.Note}}</p>
{{if .Timing.Nodes}}<table><tr><th>node</th><th>initial sync, {{.From}}</th><th>initial sync, {{.To}}</th></tr>
{{range .Timing.Nodes}}<tr><td>{{.Node}}</td><td>{{.Before}}</td><td>{{.After}}</td></tr>{{end}}</table>{{end}}
<h2>Not compared</h2>
<ul>{{range .NotCompared}}<li>{{.}}</li>{{end}}</ul>
{{if .Warnings}}<h2>Warnings</h2>
<ul>{{range .Warnings}}<li class="mono">{{.}}</li>{{end}}</ul>{{end}}
</body></html>
`))
