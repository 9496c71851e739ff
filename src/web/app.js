// The daemon's live page: polls GET /v1/view every 2 s and GET /v1/timeline every 30 s and
// draws them with plain DOM and SVG (no framework, no external file). Every text from the
// daemon goes in through textContent, never as markup.
"use strict";

const VIEW_EVERY_MS = 2000;
const TIMELINE_EVERY_MS = 30000;
const SVG_NS = "http://www.w3.org/2000/svg";
// Tableau 10, as the simulator's report: distinguishable for most colour-vision deficiencies.
// Its grey is left out: grey is memory no task accounts for.
const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                 "#edc948", "#b07aa1", "#ff9da7", "#9c755f"];

const state = { view: null, timeline: null, hours: 6, viewFailures: 0 };

// ---- small helpers ------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    node.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function num(v) { return typeof v === "number" && Number.isFinite(v) ? v : null; }

function taskColour(id) {
  const n = Math.abs(Math.trunc(num(id) || 0));
  return PALETTE[n % PALETTE.length];
}

// As every CARMA view writes ids (core/task_ref.h): 12, or 138_2 for a member of array 138.
function taskId(t) {
  const a = t && t.array;
  return a && num(a.id) !== null && num(a.index) !== null ? `${a.id}_${a.index}` : String(t.id);
}

// As the CLI's tables: 13,236 MiB.
function fmtMib(v) {
  const n = num(v);
  return n === null ? "?" : `${Math.round(n).toLocaleString("en-US")} MiB`;
}

// As the CLI's format_duration: 45s, 3m05s, 1h02m, 2d03h.
function fmtDuration(seconds) {
  const v = num(seconds);
  if (v === null || v > 1e11) return "-";
  const s = Math.max(0, Math.floor(v));
  const pad = (x) => String(x).padStart(2, "0");
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${pad(s % 60)}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${pad(Math.floor((s % 3600) / 60))}m`;
  return `${Math.floor(s / 86400)}d${pad(Math.floor((s % 86400) / 3600))}h`;
}

function fmtEnergy(joules) {
  const j = num(joules);
  if (j === null) return "-";
  if (j >= 3.6e6) return `${(j / 3.6e6).toFixed(2)} kWh`;
  if (j >= 1000) return `${(j / 1000).toFixed(1)} kJ`;
  return `${j.toFixed(0)} J`;
}

function fmtPercent(v) {
  const n = num(v);
  return n === null ? "?" : `${Math.round(n * 100)}%`;
}

function fmtClock(unix) {
  const t = num(unix);
  if (t === null) return "-";
  return new Date(t * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

function fmtGpus(list) {
  return Array.isArray(list) ? list.join(",") : String(list ?? "?");
}

function table(columns, rows, emptyText) {
  if (!rows.length) return el("div", { class: "empty", text: emptyText });
  const head = el("tr", {}, ...columns.map((c) => el("th", { class: c.cls, text: c.title })));
  const body = rows.map((r) => {
    const tr = el("tr", r.attrs || {});
    for (const c of columns) {
      const value = c.cell(r.data);
      const td = el("td", { class: [c.cls, c.cellClass ? c.cellClass(r.data) : ""].join(" ").trim() || null });
      td.append(value instanceof Node ? value : document.createTextNode(String(value)));
      tr.append(td);
    }
    return tr;
  });
  return el("table", {}, el("thead", {}, head), el("tbody", {}, ...body));
}

// Fair share: the user's part of all usage charged (filled) against their part of the shares
// (the mark), with both as percentages in the title.
function shareBar(u) {
  const usage = Math.max(0, Math.min(1, num(u.usage_norm) ?? 0));
  const share = Math.max(0, Math.min(1, num(u.shares_norm) ?? 0));
  const width = 120, height = 12;
  const title = `usage ${(usage * 100).toFixed(0)} % of all charged, share ${(share * 100).toFixed(0)} %`;
  return svg("svg", { class: "share-bar", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title },
    svg("title", {}, title),
    svg("rect", { x: 0, y: 0, width, height, class: "share-bg" }),
    svg("rect", { x: 0, y: 0, width: usage * width, height, class: usage > share ? "share-over" : "share-used", "data-usage": usage.toFixed(3) }),
    svg("line", { x1: share * width, x2: share * width, y1: 0, y2: height, class: "share-mark", "data-share": share.toFixed(3) }));
}

// ---- GPUs ---------------------------------------------------------------------------------

function badge(text, cls, title) {
  return el("span", { class: `badge ${cls}`, text, title });
}

// Stacked memory bar: each task's share in its colour, memory no task accounts for in grey.
function memoryBar(gpu) {
  const total = num(gpu.total_mib) || 1;
  const width = 300, height = 18;
  const bar = svg("svg", { viewBox: `0 0 ${width} ${height + 14}`, role: "img",
                           "aria-label": `memory ${fmtMib(gpu.used_mib)} of ${fmtMib(gpu.total_mib)}` });
  bar.append(svg("rect", { x: 0, y: 0, width, height, fill: "none", stroke: "currentColor",
                           "stroke-opacity": 0.3 }));
  let x = 0;
  const segment = (mib, fill, title) => {
    const w = Math.max(0, Math.min(width - x, (mib / total) * width));
    if (w <= 0) return;
    bar.append(svg("rect", { x, y: 0, width: w, height, fill }, svg("title", {}, title)));
    x += w;
  };
  for (const t of gpu.tasks || []) {
    if (num(t.used_mib)) segment(t.used_mib, taskColour(t.id), `task ${taskId(t)} (${t.user}): ${fmtMib(t.used_mib)}`);
  }
  // Processes CARMA did not start: taken (red), with who holds them.
  for (const f of gpu.foreign || []) {
    if (num(f.used_mib)) segment(f.used_mib, "#b33", `foreign pid ${f.pid} (${f.user || "user unknown"}): ${fmtMib(f.used_mib)}, never planned into`);
  }
  if (num(gpu.other_mib)) segment(gpu.other_mib, "var(--other)", `not a CARMA task: ${fmtMib(gpu.other_mib)}`);
  bar.append(svg("text", { x: 0, y: height + 12, "font-size": 11, class: "axis" },
                 `memory ${fmtMib(gpu.used_mib)} / ${fmtMib(gpu.total_mib)}`));
  return bar;
}

// SMACT, SMOCC and DRAMA over the monitor window with the risk filter's thresholds dashed.
function windowChart(gpu, thresholds) {
  const width = 300, height = 74, left = 26, top = 6;
  const plotW = width - left, plotH = height - top - 14;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
                             "aria-label": "SMACT, SMOCC and DRAMA over the monitor window" });
  for (const v of [0, 0.5, 1]) {
    const y = top + plotH * (1 - v);
    chart.append(svg("line", { x1: left, x2: width, y1: y, y2: y, stroke: "var(--grid)" }));
    chart.append(svg("text", { x: left - 3, y: y + 3, "font-size": 9, "text-anchor": "end", class: "axis" },
                     v.toFixed(1)));
  }
  const metrics = [["smact", "var(--smact)"], ["smocc", "var(--smocc)"], ["drama", "var(--drama)"]];
  for (const [name, colour] of metrics) {
    const limit = num((thresholds || {})[name]);
    if (limit !== null) {
      const y = top + plotH * (1 - limit);
      chart.append(svg("line", { x1: left, x2: width, y1: y, y2: y, stroke: colour,
                                 "stroke-dasharray": "4 3", "stroke-opacity": 0.8 },
                       svg("title", {}, `${name.toUpperCase()} risk threshold ${limit}`)));
    }
    const values = ((gpu.window || {})[name]) || [];
    const cap = Math.max(values.length - 1, 1);
    let d = "";
    let pen = false;  // a sample without the metric breaks the line
    values.forEach((v, i) => {
      const n = num(v);
      if (n === null) { pen = false; return; }
      const x = left + (plotW * i) / cap;
      const y = top + plotH * (1 - Math.min(1, Math.max(0, n)));
      d += `${pen ? "L" : "M"}${x.toFixed(1)},${y.toFixed(1)} `;
      pen = true;
    });
    if (d.trim()) {
      chart.append(svg("path", { d: d.trim(), fill: "none", stroke: colour, "stroke-width": 1.6 }));
    }
  }
  // A coloured key per metric with its current value (the section's legend explains dashes).
  metrics.forEach(([name, colour], i) => {
    const x = left + i * 82;
    chart.append(svg("rect", { x, y: height - 10, width: 8, height: 8, fill: colour }));
    chart.append(svg("text", { x: x + 11, y: height - 2, "font-size": 10 },
                     `${name.toUpperCase()} ${fmtPercent(gpu[name])}`));
  });
  return chart;
}

function gpuCard(gpu, view) {
  const health = (gpu.health || {}).state || "?";
  const risk = gpu.risk || {};
  const sources = gpu.sources || {};
  const card = el("article", { class: "gpu", "data-gpu": gpu.index });
  card.append(el("h3", {}, `GPU ${gpu.index}`, el("span", { class: "name", text: gpu.name || "" })));
  const badges = el("div", { class: "badges" });
  badges.append(badge(health, health === "ok" ? "ok" : health === "filling" ? "muted" : "bad",
                      (gpu.health || {}).reason || ""));
  badges.append(risk.high ? badge("risk HIGH", "bad", risk.reason || "") :
                            badge("risk ok", "ok", `rule: ${risk.rule || "?"}`));
  if (gpu.emulated) badges.append(badge("emulated", "warn", "not a real GPU: only carma-fakejob processes use it"));
  if (gpu.locked) badges.append(badge("warm-up lock", "warn", `a new task started here; locked for up to ${view.warmup_s} s`));
  badges.append(badge(`metrics: ${sources.smact || "?"}`, "muted", `rule ${risk.rule || "?"}; memory from ${sources.memory || "?"}`));
  card.append(badges);
  if (risk.high && risk.reason) card.append(el("p", { class: "reason", text: risk.reason }));
  else if (health !== "ok" && (gpu.health || {}).reason) card.append(el("p", { class: "reason", text: gpu.health.reason }));
  card.append(memoryBar(gpu));
  card.append(windowChart(gpu, view.risk_thresholds));
  const list = el("ul", { class: "tasks-on" });
  for (const t of gpu.tasks || []) {
    const swatch = el("span", { class: "swatch" });
    swatch.style.background = taskColour(t.id);
    list.append(el("li", { "data-task": t.id, "data-user": t.user },
                   swatch, `#${taskId(t)} ${t.user} · ${t.name} · ${fmtMib(t.used_mib)} · since ${fmtClock(t.since)}`));
  }
  for (const f of gpu.foreign || []) {
    list.append(el("li", { class: "foreign", "data-pid": f.pid, "data-user": f.user || "" },
                   `foreign pid ${f.pid} ${f.user || "user unknown"} · ${fmtMib(f.used_mib)} · not started by CARMA`));
  }
  if (!(gpu.tasks || []).length && !(gpu.foreign || []).length) list.append(el("li", { class: "empty", text: "idle" }));
  card.append(list);
  return card;
}

// ---- tables ---------------------------------------------------------------------------------

function logLink(task, view) {
  // Logs are the owner's: only a viewer on the daemon's socket who owns the task gets a link.
  if (!view.viewer || view.viewer !== task.user) return "";
  return el("a", { href: `/v1/tasks/${encodeURIComponent(task.id)}/logs`, target: "_blank", text: "log" });
}

function drawTables(view) {
  const running = (view.running || []).map((t) => ({ data: t, attrs: { "data-task": t.id, "data-user": t.user } }));
  document.getElementById("running").replaceChildren(table([
    { title: "ID", cls: "num", cell: (t) => taskId(t) },
    { title: "USER", cell: (t) => t.user },
    { title: "NAME", cell: (t) => t.name },
    { title: "GPUS", cell: (t) => fmtGpus(t.gpus) },
    { title: "ATTEMPT", cls: "num hide-narrow", cell: (t) => t.attempt },
    { title: "TIME", cls: "num", cell: (t) => fmtDuration(t.run_s) },
    { title: "MEM", cls: "num", cell: (t) => fmtMib(t.memory_mib) },
    { title: "", cell: (t) => logLink(t, view) },
  ], running, "nothing running"));

  const queue = (view.queue || []).map((t) => ({ data: t, attrs: { "data-task": t.id, "data-user": t.user } }));
  document.getElementById("queue").replaceChildren(table([
    { title: "ID", cls: "num", cell: (t) => taskId(t) },
    { title: "USER", cell: (t) => t.user },
    { title: "NAME", cell: (t) => t.name },
    { title: "STATE", cls: "hide-narrow", cell: (t) => t.state },
    { title: "GPUS", cls: "num", cell: (t) => t.gpus },
    { title: "MEM", cls: "num", cell: (t) => fmtMib(t.need_mib) },
    { title: "WAIT", cls: "num", cell: (t) => fmtDuration(t.wait_s) },
    { title: "REASON", cls: "reason-cell", cell: (t) => t.reason || "-" },
  ], queue, "queue empty"));
  // The view lists the head of the queue; a long queue is summed up per user beneath it.
  const total = num(view.queue_total) ?? queue.length;
  // Every user with live tasks: who waits, who runs, and fair share's usage against share.
  const users = view.queue_users || [];
  const waitingUsers = users.filter((u) => num(u.queued) || num(u.recovering) || num(u.held));
  const summary = document.getElementById("queue-summary");
  summary.replaceChildren();
  if (total > queue.length || waitingUsers.length > 1 || users.length > 1) {
    summary.append(el("p", { class: "queue-more", text: total > queue.length
      ? `the first ${queue.length} of ${total} waiting tasks, in the order they are served`
      : `${total} waiting tasks` }));
    summary.append(table([
      { title: "USER", cell: (u) => u.user },
      { title: "QUEUED", cls: "num", cell: (u) => u.queued },
      { title: "RECOVERING", cls: "num hide-narrow", cell: (u) => u.recovering },
      { title: "HELD", cls: "num", cell: (u) => u.held },
      { title: "RUNNING", cls: "num", cell: (u) => u.running },
      { title: "FACTOR", cls: "num hide-narrow", cell: (u) => (num(u.factor) === null ? "-" : num(u.factor).toFixed(2)) },
      { title: "USAGE / SHARE", cell: (u) => shareBar(u) },
    ], users.map((u) => ({ data: u, attrs: { "data-user": u.user } })), ""));
  }

  const recent = (view.recent || []).map((t) => ({ data: t, attrs: { "data-task": t.id, "data-user": t.user } }));
  document.getElementById("recent").replaceChildren(table([
    { title: "ID", cls: "num", cell: (t) => taskId(t) },
    { title: "USER", cell: (t) => t.user },
    { title: "NAME", cell: (t) => t.name },
    { title: "STATE", cell: (t) => t.state, cellClass: (t) => `state-${t.state}` },
    { title: "ATTEMPTS", cls: "num hide-narrow", cell: (t) => (num(t.ooms) ? `${t.attempts} (${t.ooms} OOM)` : t.attempts) },
    { title: "WAIT", cls: "num", cell: (t) => fmtDuration(t.wait_s) },
    { title: "RUN", cls: "num", cell: (t) => fmtDuration(t.run_s) },
    { title: "ENERGY", cls: "num hide-narrow", cell: (t) => fmtEnergy(t.energy_j) },
    { title: "ENDED", cls: "num hide-narrow", cell: (t) => fmtClock(t.finished_at) },
    // Why it ended, in the task's own words where it failed (its last stderr line).
    { title: "REASON", cls: "reason-cell", cell: (t) => (t.state === "succeeded" ? "-" : t.message || "-") },
  ], recent, "nothing finished yet"));
}

function drawView(view) {
  const running = (view.running || []).length;
  const queued = num(view.queue_total) ?? (view.queue || []).length;
  document.getElementById("summary").textContent =
    `policy ${view.policy} · ${view.backend} GPUs${String(view.backend || "").startsWith("emulated") ? " (EMULATED, not real hardware)" : ""}${num(view.time_scale) && view.time_scale !== 1 ? ` (time ×${view.time_scale})` : ""}` +
    ` · ${running} running · ${queued} waiting` + (view.viewer ? ` · you are ${view.viewer}` : "");
  document.getElementById("gpus").replaceChildren(...(view.gpus || []).map((g) => gpuCard(g, view)));
  drawTables(view);
}

// ---- timeline ---------------------------------------------------------------------------------

// Lanes so that spans overlapping in time (tasks sharing the GPU) sit on separate rows.
function assignLanes(spans) {
  const laneEnds = [];
  for (const s of spans.sort((a, b) => a.start - b.start)) {
    let lane = laneEnds.findIndex((end) => end <= s.start);
    if (lane < 0) { lane = laneEnds.length; laneEnds.push(0); }
    laneEnds[lane] = s.end;
    s.lane = lane;
  }
  return Math.max(laneEnds.length, 1);
}

function timeTicks(since, until, plotW, left) {
  const span = until - since;
  const steps = [60, 120, 300, 600, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
  const most = Math.max(2, Math.floor(plotW / 110));  // labels about 60 px wide, never touching
  const step = steps.find((s) => span / s <= most) || 86400;
  const out = [];
  for (let t = Math.ceil(since / step) * step; t <= until; t += step) {
    out.push({ t, x: left + ((t - since) / span) * plotW });
  }
  return out;
}

// The span drawn: the asked one, cut to where something was recorded (a daemon started an
// hour ago has nothing to show for the five before), at least ten minutes. One for all GPUs.
function timelineRange(tl) {
  const until = num(tl.until);
  let first = until;
  for (const g of tl.gpus || []) {
    if ((g.samples || []).length) first = Math.min(first, num(g.samples[0].t) ?? until);
  }
  for (const task of tl.tasks || []) {
    for (const a of task.attempts || []) first = Math.min(first, num(a.started_at) ?? until);
  }
  const since = Math.max(num(tl.since), Math.min(first - 30, until - 300));
  return { since, until };
}

function timelineChart(gpu, tl, range, width) {
  const since = range.since, until = range.until;
  const left = 40, right = 8, plotW = width - left - right;
  const metricH = 60, laneH = 16, pad = 8;
  const xOf = (t) => left + ((Math.min(Math.max(t, since), until) - since) / (until - since)) * plotW;
  const spans = [];
  const ooms = [];
  for (const task of tl.tasks || []) {
    for (const a of task.attempts || []) {
      if (!(a.gpus || []).includes(gpu.index) || num(a.started_at) === null) continue;
      const end = num(a.ended_at) ?? until;
      if (end < since || a.started_at > until) continue;
      spans.push({ task, attempt: a, start: a.started_at, end });
      if (a.outcome === "out-of-memory" && num(a.ended_at) !== null) ooms.push({ task, t: a.ended_at });
    }
  }
  const lanes = assignLanes(spans);
  const lanesTop = pad + metricH + 8;
  const height = lanesTop + lanes * laneH + 16;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "data-timeline-gpu": gpu.index,
                             "aria-label": `GPU ${gpu.index}: memory, SMACT and tasks over time` });
  for (const v of [0, 0.5, 1]) {
    const y = pad + metricH * (1 - v);
    chart.append(svg("line", { x1: left, x2: width - right, y1: y, y2: y, stroke: "var(--grid)" }));
    chart.append(svg("text", { x: left - 4, y: y + 4, "font-size": 10, "text-anchor": "end", class: "axis" }, `${v * 100}%`));
  }
  const total = num(gpu.total_mib) || 1;
  const samples = gpu.samples || [];
  if (samples.length) {
    // Memory used (share of the GPU's total) as an area, SMACT as a line, both step-wise.
    const base = pad + metricH;
    let area = `M${xOf(samples[0].t).toFixed(1)},${base}`;
    let line = "";
    // A sample holds until the next one, but not across a gap (the daemon was down).
    const hold = Math.max(num(tl.step_s) || 0, 10) * 2;
    samples.forEach((s, i) => {
      const next = i + 1 < samples.length ? samples[i + 1].t : until;
      const gap = next - s.t > hold;
      const x0 = xOf(s.t);
      const x1 = xOf(gap ? s.t + hold / 2 : next);
      const ym = pad + metricH * (1 - Math.min(1, (num(s.used_mib) || 0) / total));
      area += ` L${x0.toFixed(1)},${ym.toFixed(1)} L${x1.toFixed(1)},${ym.toFixed(1)}`;
      if (gap) area += ` L${x1.toFixed(1)},${base} L${xOf(next).toFixed(1)},${base}`;
      const sm = num(s.smact);
      if (sm !== null) {
        const ys = pad + metricH * (1 - Math.min(1, sm));
        line += `${line ? " L" : "M"}${x0.toFixed(1)},${ys.toFixed(1)} L${x1.toFixed(1)},${ys.toFixed(1)}`;
      }
    });
    area += ` L${xOf(until).toFixed(1)},${base} Z`;
    chart.append(svg("path", { d: area, fill: "var(--mem)", stroke: "none" }, svg("title", {}, "memory used")));
    if (line) chart.append(svg("path", { d: line, fill: "none", stroke: "var(--smact)", "stroke-width": 1.2 }, svg("title", {}, "SMACT")));
  } else {
    chart.append(svg("text", { x: left + 6, y: metricH / 2, "font-size": 12, class: "axis" }, "no samples stored in this span"));
  }
  for (const s of spans) {
    const x = xOf(s.start), w = Math.max(2, xOf(s.end) - x);
    const y = lanesTop + s.lane * laneH;
    const oom = s.attempt.outcome === "out-of-memory";
    const g = svg("g", { "data-task": s.task.id, "data-outcome": s.attempt.outcome });
    g.append(svg("rect", { x, y, width: w, height: laneH - 3, rx: 2, fill: taskColour(s.task.id),
                           "fill-opacity": oom ? 0.45 : 0.85, stroke: oom ? "var(--bad)" : "none" },
                 svg("title", {}, `task ${taskId(s.task)} ${s.task.name} (${s.task.user}), attempt ${s.attempt.number}: ` +
                                  `${s.attempt.outcome}, ${fmtClock(s.start)}–${s.attempt.ended_at ? fmtClock(s.end) : "now"}`)));
    const label = `#${taskId(s.task)} ${s.task.name}`;
    if (w > label.length * 6.2 + 6) {
      g.append(svg("text", { x: x + 3, y: y + laneH - 6, "font-size": 10, class: "span-label" }, label));
    }
    chart.append(g);
  }
  for (const o of ooms) {
    const x = xOf(o.t);
    chart.append(svg("g", { class: "oom", "data-task": o.task.id },
                     svg("line", { x1: x, x2: x, y1: 0, y2: lanesTop + lanes * laneH, stroke: "var(--bad)", "stroke-width": 1.5 }),
                     // The label goes left of a mark near the right edge, so it is never cut off.
                     svg("text", x + 30 > width - right ?
                                 { x: x - 3, y: lanesTop - 2, "font-size": 10, fill: "var(--bad)", "text-anchor": "end" } :
                                 { x: x + 3, y: lanesTop - 2, "font-size": 10, fill: "var(--bad)" }, "OOM"),
                     svg("title", {}, `task ${taskId(o.task)} ran out of memory at ${fmtClock(o.t)}`)));
  }
  for (const tick of timeTicks(since, until, plotW, left)) {
    chart.append(svg("text", { x: tick.x, y: height - 3, "font-size": 10, "text-anchor": "middle", class: "axis" },
                     fmtClock(tick.t)));
  }
  return chart;
}

function drawTimeline(tl) {
  const legend = document.getElementById("timeline-legend");
  legend.replaceChildren(
    el("span", {}, el("span", { class: "swatch sw-mem" }), "memory used"),
    el("span", {}, el("span", { class: "swatch sw-smact" }), "SMACT"),
    el("span", {}, el("span", { class: "swatch sw-oom" }), "out-of-memory crash"),
    el("span", {}, "bars: task attempts, one colour per task; faded with a red edge: ended out of memory"));
  const box = document.getElementById("timeline");
  const range = timelineRange(tl);
  box.dataset.stepS = String(num(tl.step_s) ?? "");
  // Drawn at the box's own width, so its text stays readable on a phone.
  const width = Math.max(320, Math.min(1000, (box.clientWidth || 1000) - 16));
  box.replaceChildren(...(tl.gpus || []).map((g) =>
    el("div", { class: "timeline-gpu" }, el("h3", { text: `GPU ${g.index} · ${g.name || ""}` }), timelineChart(g, tl, range, width))));
}

// ---- polling ----------------------------------------------------------------------------------

function setConnection(ok, text) {
  const c = document.getElementById("connection");
  c.textContent = text;
  c.classList.toggle("lost", !ok);
}

async function getJson(url) {
  // The header marks the page's own requests: the daemon refuses a browser's request to its API
  // without it, and no page of another origin may send it (a CORS preflight it never approves).
  const res = await fetch(url, { cache: "no-store", credentials: "same-origin", headers: { "X-Carma-Page": "1" } });
  if (!res.ok) {
    let message = `HTTP ${res.status}`;
    try { message = (await res.json()).error || message; } catch (e) { /* not JSON */ }
    throw new Error(message);
  }
  return res.json();
}

async function pollView() {
  try {
    const view = await getJson("/v1/view");
    state.view = view;
    state.viewFailures = 0;
    drawView(view);
    setConnection(true, `updated ${new Date().toLocaleTimeString()}`);
  } catch (e) {
    state.viewFailures += 1;
    setConnection(false, `daemon not answering (${e.message}); retrying`);
  }
  setTimeout(pollView, VIEW_EVERY_MS);
}

async function pollTimeline() {
  try {
    // The daemon's clock, not this browser's: they differ when the page is seen from elsewhere.
    const until = num((state.view || {}).now) ?? Date.now() / 1000;
    const since = until - state.hours * 3600;
    // The charts draw attempts: only tasks that ran in the span, however long the queue is.
    const ask = (from) => getJson(`/v1/timeline?since=${from.toFixed(0)}&until=${Math.ceil(until)}&points=500&ran=1&limit=5000`);
    let tl = await ask(since);
    // The samples come in 500 buckets over the span asked for. A daemon with four minutes of
    // history drawn from a six-hour answer shows 43-second buckets, so memory seems in use before
    // anything ran: ask again for the span drawn, and the buckets follow the window shown.
    const drawn = timelineRange(tl);
    if (drawn.since - since > 2 * (num(tl.step_s) ?? 0)) tl = await ask(Math.floor(drawn.since));
    state.timeline = tl;
    drawTimeline(tl);
  } catch (e) {
    document.getElementById("timeline").replaceChildren(
      el("div", { class: "empty", text: `timeline unavailable: ${e.message}` }));
  }
}

document.getElementById("hours").addEventListener("change", (ev) => {
  state.hours = Number(ev.target.value) || 6;
  pollTimeline();
});

// Timelines are drawn at the box's width: a rotated phone or resized window redraws them.
window.addEventListener("resize", () => { if (state.timeline) drawTimeline(state.timeline); });

pollView();
pollTimeline();
setInterval(pollTimeline, TIMELINE_EVERY_MS);
