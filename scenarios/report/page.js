"use strict";
// The timeline's interactive half: it redraws the SVG that report.Write
// drew for the whole replay, at any zoom and pan, shows each event's
// details on hover, and the dataplane's snapshot at the instant clicked.
// Everything it needs is in the page (#data); it fetches nothing.
(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  const svg = document.getElementById("tl");
  const box = document.getElementById("timeline");
  const tip = document.getElementById("tip");
  const LABEL_W = +svg.dataset.labelW, LANE_H = +svg.dataset.laneH, AXIS_H = +svg.dataset.axisH, COL_W = +svg.dataset.colW, PAD = +svg.dataset.pad, RIGHT = +svg.dataset.right;
  const HIST = 4096; // report.HistBuckets
  const unit = data.unit, end = Math.max(data.end, 1);
  const labelFail = data.labels.map((l) => /(^| )fail( |$)/.test(l[0]));

  const lanes = data.lanes.map((l) => {
    const n = l.t.length, t = new Float64Array(n);
    let acc = 0, maxDur = 0;
    for (let i = 0; i < n; i++) {
      acc += l.t[i];
      t[i] = acc;
      if (l.d && l.d[i] > maxDur) maxDur = l.d[i];
    }
    const fails = [];
    for (let i = 0; i < n; i++) if (labelFail[l.l[i]]) fails.push(i);
    let r = null;
    if (l.r) {
      r = new Array(l.r.length);
      let run = 0;
      for (let i = 0; i < l.r.length; i++) r[i] = (run += l.r[i]);
    }
    return { name: l.name, kind: l.kind, total: l.total, t, l: l.l, d: l.d, r, h: l.h, fails, maxDur };
  });
  const snapT = [];
  {
    let acc = 0;
    for (const d of data.snaps.t || []) snapT.push((acc += d));
  }
  const snapRun = [];
  {
    let run = 0;
    for (const d of data.snaps.r || []) snapRun.push((run += d));
  }
  const snapWhy = (k) => data.snaps.whys[data.snaps.w[k]] + (snapRun[k] ? " " + snapRun[k] : "");

  let v0 = 0, v1 = end, cursor = null, frame = 0;

  // lowerBound is the first index whose value is >= x.
  function lowerBound(a, x) {
    let lo = 0, hi = a.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (a[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo;
  }
  function upperBound(a, x) {
    let lo = 0, hi = a.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (a[mid] <= x) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  // fmtDur writes nanoseconds as Go's time.Duration does ("1m30s", "1.5s", "250ms").
  function fmtDur(ns) {
    ns = Math.round(ns);
    if (ns === 0) return "0s";
    const neg = ns < 0 ? "-" : "";
    ns = Math.abs(ns);
    const frac = (v, digits) => {
      const s = String(v).padStart(digits, "0").replace(/0+$/, "");
      return s ? "." + s : "";
    };
    if (ns < 1e3) return neg + ns + "ns";
    if (ns < 1e6) return neg + Math.floor(ns / 1e3) + frac(ns % 1e3, 3) + "µs";
    if (ns < 1e9) return neg + Math.floor(ns / 1e6) + frac(ns % 1e6, 6) + "ms";
    const s = Math.floor(ns / 1e9), rest = ns % 1e9;
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    let out = sec + frac(rest, 9) + "s";
    if (h > 0 || m > 0) out = m + "m" + out;
    if (h > 0) out = h + "h" + out;
    return neg + out;
  }
  const steps = (() => {
    const out = [];
    for (const u of [1, 1e3, 1e6]) for (const m of [1, 2, 5, 10, 20, 50, 100, 200, 500]) out.push(m * u);
    for (const s of [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400]) out.push(s * 1e9);
    return out;
  })();
  function tickStep(spanNs, width) {
    for (const s of steps) if (s / spanNs * width >= 80) return s;
    return steps[steps.length - 1];
  }
  const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  const f1 = (x) => x.toFixed(1);

  function plotWidth() {
    return Math.max(200, box.clientWidth - LABEL_W - 2 * PAD - RIGHT);
  }

  function render() {
    frame = 0;
    const W = plotWidth(), span = v1 - v0;
    const width = LABEL_W + W + 2 * PAD + RIGHT, height = AXIS_H + lanes.length * LANE_H + 4;
    const X = (t) => LABEL_W + PAD + (t - v0) / span * W;
    const ncols = Math.max(1, Math.floor(W / COL_W));
    let s = `<defs><clipPath id="plotclip"><rect id="cliprect" x="${LABEL_W}" y="0" width="${W + 2 * PAD}" height="${height}"/></clipPath></defs>`;
    s += '<g id="lanes">';
    lanes.forEach((l, i) => {
      const y = AXIS_H + i * LANE_H;
      s += `<g class="lane" data-lane="${i}" data-kind="${l.kind}"><rect class="lanebg${i % 2 ? " odd" : ""}" x="0" y="${y}" width="${width}" height="${LANE_H}"/>` +
        `<text class="lanename" x="6" y="${y + 15}">${esc(l.name)}</text><text class="lanecount" x="${LABEL_W - 6}" y="${y + 15}">${l.total}</text></g>`;
    });
    s += '</g><g id="axis">';
    const step = tickStep(span * unit, W) / unit;
    for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      const x = f1(X(t));
      s += `<line class="grid" x1="${x}" x2="${x}" y1="${AXIS_H - 6}" y2="${height}"/><text class="ticklabel" x="${x}" y="${AXIS_H - 10}">${fmtDur(t * unit)}</text>`;
    }
    s += '</g><g id="marks" clip-path="url(#plotclip)" data-render="js">';
    let overlay = "";
    lanes.forEach((l, li) => {
      const top = AXIS_H + li * LANE_H;
      s += `<g class="lanemarks" data-lane="${li}">`;
      const i0 = lowerBound(l.t, v0 - l.maxDur), i1 = upperBound(l.t, v1);
      const fromHist = l.h && span / end * HIST >= ncols;
      if (fromHist || i1 - i0 > ncols) {
        s += columns(l, li, top, i0, i1, fromHist, ncols, W);
        for (const i of l.fails) if (l.t[i] >= v0 && l.t[i] <= v1) s += mark(l, i, top, X);
      } else {
        for (let i = i0; i < i1; i++) s += mark(l, i, top, X);
      }
      if (l.kind === "checks") {
        for (const i of l.fails) {
          if (l.t[i] < v0 || l.t[i] > v1) continue;
          const x = f1(X(l.t[i]));
          overlay += `<line class="failline" x1="${x}" x2="${x}" y1="${AXIS_H}" y2="${height}"/>`;
        }
      }
      s += "</g>";
    });
    s += `</g><g id="overlay" clip-path="url(#plotclip)">${overlay}`;
    const cx = cursor === null ? -10 : f1(X(cursor));
    s += `<line id="cursor" x1="${cx}" x2="${cx}" y1="${AXIS_H - 6}" y2="${height}"/></g>`;
    svg.setAttribute("width", width);
    svg.setAttribute("height", height);
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.innerHTML = s;
    document.getElementById("range").textContent = `${fmtDur(v0 * unit)} – ${fmtDur(v1 * unit)} (${fmtDur(span * unit)} shown)`;
  }

  function mark(l, i, top, X) {
    const cls = esc(data.labels[l.l[i]][0]);
    const x0 = X(l.t[i]), y = top + 4, h = LANE_H - 8;
    const at = `data-lane="${lanes.indexOf(l)}" data-i="${i}"`;
    switch (l.kind) {
      case "runs": {
        const w = l.d[i] > 0 ? Math.max(2, X(l.t[i] + l.d[i]) - x0) : 2;
        return `<rect class="m bar ${cls}" ${at} x="${f1(x0)}" y="${y}" width="${f1(w)}" height="${h}"/>`;
      }
      case "checks": {
        const cy = top + LANE_H / 2, r = labelFail[l.l[i]] ? 7 : 5;
        return `<path class="m ${cls}" ${at} d="M${f1(x0)} ${f1(cy - r)}l${r} ${r}l-${r} ${r}l-${r} -${r}z"/>`;
      }
      case "deferrals": {
        let wait = "";
        if (l.d && l.d[i] > 0) {
          const cy = top + LANE_H / 2;
          wait = `<line class="wait" x1="${f1(x0)}" x2="${f1(X(l.t[i] + l.d[i]))}" y1="${cy}" y2="${cy}"/>`;
        }
        return wait + `<rect class="m tick ${cls}" ${at} x="${f1(x0 - 1)}" y="${y}" width="2" height="${h}"/>`;
      }
    }
    return `<rect class="m tick ${cls}" ${at} x="${f1(x0 - 1)}" y="${y}" width="2" height="${h}"/>`;
  }

  // columns draws a lane as counts per COL_W pixels: from the exact
  // histogram of a thinned lane when a column spans whole buckets, else by
  // counting the marks held.
  function columns(l, li, top, i0, i1, fromHist, ncols, W) {
    const span = v1 - v0, counts = new Float64Array(ncols);
    if (fromHist) {
      const b0 = Math.max(0, Math.floor(v0 / end * HIST)), b1 = Math.min(HIST - 1, Math.floor(v1 / end * HIST));
      for (let b = b0; b <= b1; b++) {
        const mid = (b + 0.5) / HIST * end, c = Math.floor((mid - v0) / span * ncols);
        if (c >= 0 && c < ncols) counts[c] += l.h[b];
      }
    } else {
      for (let c = 0; c < ncols; c++) {
        const a = v0 + span * c / ncols, b = v0 + span * (c + 1) / ncols;
        counts[c] = (c === ncols - 1 ? upperBound(l.t, b) : lowerBound(l.t, b)) - lowerBound(l.t, a);
      }
    }
    let most = 0;
    for (const c of counts) if (c > most) most = c;
    let s = "";
    const full = LANE_H - 6;
    for (let c = 0; c < ncols; c++) {
      if (!counts[c]) continue;
      const hh = most <= 1 ? full : Math.max(2, full * Math.log1p(counts[c]) / Math.log1p(most));
      s += `<rect class="agg k-${l.kind}" data-lane="${li}" data-col="${c}" data-count="${counts[c]}" x="${f1(LABEL_W + PAD + c * COL_W)}" y="${f1(top + LANE_H - 3 - hh)}" width="${COL_W}" height="${f1(hh)}"/>`;
    }
    return s;
  }

  function schedule() {
    if (!frame) frame = requestAnimationFrame(render);
  }

  function setView(a, b) {
    const minSpan = Math.max(1, 100 / unit);
    let span = Math.min(end, Math.max(minSpan, b - a));
    a = Math.min(Math.max(0, a), end - span);
    v0 = a;
    v1 = a + span;
    schedule();
  }
  function zoom(factor, at) {
    if (at === undefined) at = (v0 + v1) / 2;
    setView(at - (at - v0) * factor, at + (v1 - at) * factor);
  }
  function pan(frac) {
    const d = (v1 - v0) * frac;
    setView(v0 + d, v1 + d);
  }

  // Pointer position to an instant and a lane.
  function where(ev) {
    const r = svg.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top;
    const W = plotWidth();
    return { x, y, t: v0 + (x - LABEL_W - PAD) / W * (v1 - v0), lane: Math.floor((y - AXIS_H) / LANE_H), inPlot: x >= LABEL_W };
  }

  function details(l, i) {
    const at = fmtDur(l.t[i] * unit), text = data.labels[l.l[i]][1];
    if (l.kind === "runs") {
      const d = l.d[i];
      const sync = data.syncTexts[data.syncs[l.r[i] - 1]];
      return `${at} run ${l.r[i]} ${text.replace(/^run /, "")}\n   ${at} to ${fmtDur((l.t[i] + d) * unit)}, cost ${fmtDur(d * unit)}` + (sync ? `\n   ${sync}` : "");
    }
    if (l.kind === "deferrals" && l.d && l.d[i] >= 0) return `${at} ${text} (waits ${fmtDur(l.d[i] * unit)})`;
    return `${at} ${text}`;
  }

  function hover(ev) {
    const p = where(ev);
    const l = lanes[p.lane];
    if (!l || !p.inPlot) {
      tip.hidden = true;
      return;
    }
    const tol = 3 / plotWidth() * (v1 - v0);
    const found = [];
    const i0 = lowerBound(l.t, p.t - tol - l.maxDur), i1 = upperBound(l.t, p.t + tol);
    for (let i = i0; i < i1; i++) {
      const stop = l.kind === "runs" ? l.t[i] + Math.max(l.d[i], 0) : l.t[i];
      if (stop >= p.t - tol) found.push(i);
    }
    let text = `${l.name} · ${fmtDur(p.t * unit)}`;
    if (l.h && (v1 - v0) / end * HIST >= plotWidth() / COL_W) {
      const b = Math.min(HIST - 1, Math.max(0, Math.floor(p.t / end * HIST)));
      text += `\n${l.h[b]} events in ${fmtDur(b * end / HIST * unit)} – ${fmtDur((b + 1) * end / HIST * unit)} (exact count; events held one by one: ${l.t.length} of ${l.total})`;
    }
    if (!found.length && !l.h) {
      tip.hidden = true;
      return;
    }
    const shown = found.slice(0, 10).map((i) => details(l, i));
    if (found.length > 10) shown.push(`… and ${found.length - 10} more here`);
    if (shown.length) text += "\n" + shown.join("\n");
    tip.textContent = text;
    tip.hidden = false;
    const tx = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
    tip.style.left = Math.max(4, tx) + "px";
    tip.style.top = ev.clientY + 16 + "px";
  }

  // The dataplane at an instant: the latest snapshot at or before it,
  // lines new since the previous snapshot highlighted, removed ones listed.
  function showSnapshot(t) {
    cursor = t;
    const at = document.getElementById("snapat"), why = document.getElementById("snapwhy"), pre = document.getElementById("snaptext");
    at.textContent = fmtDur(t * unit);
    const k = upperBound(snapT, t) - 1;
    if (k < 0) {
      why.textContent = "nothing written to the dataplane yet";
      pre.textContent = "";
      schedule();
      return;
    }
    const text = data.snaps.texts[data.snaps.i[k]];
    const prev = k > 0 ? data.snaps.texts[data.snaps.i[k - 1]] : "";
    const before = new Set(prev.split("\n")), now = new Set(text.split("\n"));
    let html = "";
    for (const line of text.replace(/\n$/, "").split("\n")) html += before.has(line) ? esc(line) + "\n" : `<span class="add">${esc(line)}</span>\n`;
    const gone = prev.replace(/\n$/, "").split("\n").filter((x) => x && !now.has(x));
    if (gone.length) {
      html += "\n— gone since the previous snapshot —\n";
      for (const line of gone) html += `<span class="del">${esc(line)}</span>\n`;
    }
    pre.innerHTML = html;
    const total = data.snaps.total > snapT.length ? ` (${data.snaps.total} taken, ${snapT.length} kept)` : "";
    why.textContent = `snapshot ${k + 1} of ${snapT.length}${total}: ${snapWhy(k)}, at ${fmtDur(snapT[k] * unit)}`;
    schedule();
  }

  let drag = null;
  svg.addEventListener("pointerdown", (ev) => {
    drag = { x: ev.clientX, v0, v1, moved: false };
    svg.setPointerCapture(ev.pointerId);
  });
  svg.addEventListener("pointermove", (ev) => {
    if (drag) {
      const dx = ev.clientX - drag.x;
      if (Math.abs(dx) > 3) drag.moved = true;
      if (drag.moved) {
        svg.classList.add("dragging");
        tip.hidden = true;
        const dt = -dx / plotWidth() * (drag.v1 - drag.v0);
        setView(drag.v0 + dt, drag.v1 + dt);
        return;
      }
    }
    hover(ev);
  });
  svg.addEventListener("pointerup", (ev) => {
    const d = drag;
    drag = null;
    svg.classList.remove("dragging");
    if (d && !d.moved) {
      const p = where(ev);
      if (p.inPlot) showSnapshot(Math.min(end, Math.max(0, p.t)));
    }
  });
  svg.addEventListener("pointerleave", () => { tip.hidden = true; });
  svg.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const p = where(ev);
    zoom(ev.deltaY > 0 ? 1.25 : 0.8, p.inPlot ? p.t : undefined);
  }, { passive: false });
  document.getElementById("zoomin").onclick = () => zoom(0.5);
  document.getElementById("zoomout").onclick = () => zoom(2);
  document.getElementById("fit").onclick = () => setView(0, end);
  document.getElementById("left").onclick = () => pan(-0.25);
  document.getElementById("right").onclick = () => pan(0.25);
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "+" || ev.key === "=") zoom(0.5);
    else if (ev.key === "-") zoom(2);
    else if (ev.key === "0") setView(0, end);
    else if (ev.key === "ArrowLeft") pan(-0.25);
    else if (ev.key === "ArrowRight") pan(0.25);
  });
  window.addEventListener("resize", schedule);
  for (const a of document.querySelectorAll("#failures .jump")) {
    a.addEventListener("click", (ev) => {
      ev.preventDefault();
      const f = data.failures[+a.parentElement.dataset.f];
      const half = Math.max((v1 - v0) / 2, 1);
      setView(f.at - half, f.at + half);
      showSnapshot(f.at);
    });
  }

  // parseDur reads Go's duration text ("1m30s", "1.5s", "250ms") as units.
  function parseDur(s) {
    const scale = { ns: 1, us: 1e3, "µs": 1e3, ms: 1e6, s: 1e9, m: 60e9, h: 3600e9 };
    if (!s) return null;
    let ns = 0, rest = s;
    const re = /^(\d+(?:\.\d*)?)(ns|us|µs|ms|s|m|h)/;
    while (rest) {
      const m = re.exec(rest);
      if (!m) return null;
      ns += parseFloat(m[1]) * scale[m[2]];
      rest = rest.slice(m[0].length);
    }
    return ns / unit;
  }

  // Start where the story went wrong, else at the end; a link may say
  // otherwise: page.html#from=1s&to=1.3s&at=1.15s.
  let start = data.failures && data.failures.length ? data.failures[0].at : end;
  const want = new URLSearchParams(location.hash.slice(1));
  const from = parseDur(want.get("from") || ""), to = parseDur(want.get("to") || ""), at = parseDur(want.get("at") || "");
  if (from !== null && to !== null && to > from) {
    setView(from, to);
  }
  if (at !== null) start = Math.min(end, Math.max(0, at));
  showSnapshot(start);
  const t0 = performance.now();
  render();
  document.body.dataset.renderMs = (performance.now() - t0).toFixed(1);
  document.body.dataset.drawn = "js";
})();
