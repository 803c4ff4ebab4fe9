// muser dashboard: plain JavaScript, no build step, no dependencies.
// It polls /dashboard/api/state and draws what it returns; every figure's
// tag (measured, configured, unavailable) comes from the server.
"use strict";

const STATE_URL = "/dashboard/api/state";
const POLL_MS = 2000;

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("data-") || k === "title" || k === "id") e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const k of kids) {
    if (k === null || k === undefined) continue;
    e.append(k instanceof Node ? k : String(k));
  }
  return e;
}

function svgEl(tag, attrs) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

function fmtNum(v, unit) {
  if (v === null || v === undefined) return "";
  switch (unit) {
    case "ratio": return (100 * v).toFixed(1) + " %";
    case "bytes": return fmtBytes(v);
    case "ms": return v.toFixed(1) + " ms";
    case "s": return v.toFixed(0) + " s";
    case "tokens/s": return v.toFixed(1) + " tokens/s";
    case "on/off": return v ? "on" : "off";
  }
  const s = Number.isInteger(v) ? String(v) : v.toFixed(2);
  return unit ? s + " " + unit : s;
}

function fmtBytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + units[i];
}

// fig renders a Figure {value, unit, tag, window, source, reason}.
function fig(name, f) {
  const tagText = f.tag === "measured" ? "measured · " + (f.window || "")
    : f.tag === "configured" ? "configured · " + (f.source || "")
    : "unavailable";
  const title = f.tag === "unavailable" ? f.reason : (f.source || "");
  const val = f.tag === "unavailable" ? "—" : fmtNum(f.value, f.unit);
  return el("span", {},
    el("span", {class: "fig", "data-figure": name, "data-tag": f.tag, "data-value": f.value === null || f.value === undefined ? "" : String(f.value), title: title}, val),
    el("span", {class: "tag tag-" + f.tag, title: title}, tagText),
    f.tag === "unavailable" && f.reason ? el("span", {class: "reason"}, " " + f.reason) : null);
}

// listTag shows a table's tag {tag, window, source} beside its heading.
function listTag(id, lt) {
  const e = document.getElementById(id);
  if (!lt || !lt.tag) {
    e.replaceChildren(el("span", {class: "tag tag-unavailable", "data-tag": "unavailable"}, "unavailable"));
    return;
  }
  e.replaceChildren(el("span", {class: "tag tag-" + lt.tag, "data-tag": lt.tag, title: lt.source || ""},
    lt.tag + (lt.window ? " · " + lt.window : "")));
}

function figRows(tbody, entries) {
  tbody.replaceChildren(...entries.map(([label, name, f]) =>
    el("tr", {"data-row": name}, el("th", {}, label), el("td", {}, fig(name, f)))));
}

// Tabs.
function showTab(name) {
  for (const b of document.querySelectorAll("nav [data-tab]")) b.setAttribute("aria-selected", String(b.dataset.tab === name));
  for (const p of document.querySelectorAll("[data-panel]")) p.hidden = p.dataset.panel !== name;
  document.body.dataset.tab = name;
}
for (const b of document.querySelectorAll("nav [data-tab]")) b.addEventListener("click", () => { showTab(b.dataset.tab); poll(); });
showTab("inference");

// The API key (a tenant's) authorizes the chat request; the admin key the
// state and the admin endpoint (loopback clients need none unless the
// server has --admin-key-file).
function bearer(id) {
  const key = document.getElementById(id).value.trim();
  return key ? {"Authorization": "Bearer " + key} : {};
}
function authHeaders() { return bearer("api-key"); }
function adminHeaders() { return bearer("admin-key"); }

// Charts: a line over the buckets; a bucket with nothing measured is a gap.
function drawChart(svg, points, field, opts) {
  const W = 400, H = 140, L = 40, R = 8, T = 10, B = 20;
  svg.replaceChildren();
  const vals = points.map(p => p[field]);
  const known = vals.filter(v => v !== null && v !== undefined);
  let max = opts.max !== undefined ? opts.max : Math.max(...known, 0);
  if (!(max > 0)) max = 1;
  const x = i => L + (W - L - R) * (points.length <= 1 ? 0 : i / (points.length - 1));
  const y = v => T + (H - T - B) * (1 - v / max);
  svg.append(svgEl("line", {class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B}));
  svg.append(svgEl("line", {class: "axis", x1: L, y1: T, x2: L, y2: H - B}));
  const top = svgEl("text", {x: 2, y: T + 8}); top.textContent = opts.label(max); svg.append(top);
  const zero = svgEl("text", {x: 2, y: H - B}); zero.textContent = opts.label(0); svg.append(zero);
  const span = svgEl("text", {x: L, y: H - 4}); span.textContent = "−" + Math.round(points.length * opts.step / 60) + " min"; svg.append(span);
  const now = svgEl("text", {x: W - R - 20, y: H - 4}); now.textContent = "now"; svg.append(now);
  let path = "";
  let pen = false;
  vals.forEach((v, i) => {
    if (v === null || v === undefined) { pen = false; return; }
    path += (pen ? "L" : "M") + x(i).toFixed(1) + " " + y(v).toFixed(1) + " ";
    pen = true;
    svg.append(svgEl("circle", {class: "dot", cx: x(i).toFixed(1), cy: y(v).toFixed(1), r: 1.8}));
  });
  if (path) svg.append(svgEl("path", {class: "line", d: path}));
  svg.dataset.points = String(known.length);
  if (!known.length) {
    const t = svgEl("text", {x: L + 10, y: H / 2}); t.textContent = "unavailable: nothing measured in the last 10 minutes"; svg.append(t);
  }
}

function cell(v, cls) { return el("td", cls ? {class: cls} : {}, v === null || v === undefined ? "—" : v); }
function ms(v) { return v === null || v === undefined ? "—" : v.toFixed(1); }
function when(t) { return t ? new Date(t).toLocaleTimeString() : "—"; }

function render(st) {
  document.getElementById("server-model").textContent = st.server.model;
  document.getElementById("server-version").textContent = st.server.version ? "version " + st.server.version : "";
  const settings = Object.entries(st.server.settings).sort().map(([k, f]) => [k, "setting-" + k, f]);
  settings.push(["uptime", "uptime", st.server.uptime]);
  figRows(document.querySelector("#settings tbody"), settings);
  const t = st.totals;
  figRows(document.querySelector("#totals tbody"), [
    ["requests", "requests", t.requests],
    ["cache hit rate", "hit_rate", t.hit_rate],
    ["cached tokens", "cached_tokens", t.cached_tokens],
    ["  from the store", "cached_store", t.cached_store],
    ["  from a slot", "cached_slot", t.cached_slot],
    ["prompt tokens", "prompt_tokens", t.prompt_tokens],
    ["generated tokens", "generated_tokens", t.generated_tokens],
    ["mean time to first token", "ttft_mean", t.ttft_mean],
    ["decode tokens/s", "decode_tokens_per_second", t.decode_tokens_per_second],
    ["queue now", "queue", st.live.queue],
    ["slots busy now", "slots_busy", st.live.slots_busy],
  ]);
  const pts = st.series.points;
  listTag("charts-tag", {tag: st.series.tag, window: st.series.step_s + " s buckets over the last " + Math.round(st.series.window_s / 60) + " min", source: "scheduler"});
  listTag("slots-tag", st.live.slots_tag);
  listTag("recent-tag", st.recent_tag);
  listTag("packs-tag", st.store.packs_tag);
  listTag("receipts-tag", st.receipts.list_tag);
  drawChart(document.getElementById("chart-ttft"), pts, "ttft_ms", {step: st.series.step_s, label: v => v.toFixed(0)});
  drawChart(document.getElementById("chart-tps"), pts, "tokens_per_second", {step: st.series.step_s, label: v => v.toFixed(0)});
  drawChart(document.getElementById("chart-hit"), pts, "hit_rate", {step: st.series.step_s, max: 1, label: v => (100 * v).toFixed(0) + "%"});
  document.querySelector("#slots tbody").replaceChildren(...(st.live.slots || []).map(s =>
    el("tr", {"data-slot": String(s.id)}, cell(s.id), cell(s.state), cell(s.request_id || ""), cell(s.n_tokens, "num"),
      cell(s.n_prompt_tokens, "num"), cell(s.n_cached_tokens, "num"), cell(s.n_decoded, "num"))));
  document.querySelector("#recent tbody").replaceChildren(...st.recent.map(r =>
    el("tr", {"data-request": r.id}, cell(when(r.done)), cell(r.route), cell(r.prompt_tokens, "num"), cell(r.cached_tokens, "num"),
      cell(ms(r.restore_ms), "num"), cell(ms(r.prefill_ms), "num"), cell(ms(r.ttft_ms), "num"),
      cell(r.decode_tokens_per_second === null ? "—" : r.decode_tokens_per_second.toFixed(1), "num"), cell(r.prefill_at))));

  // Store.
  const ss = st.store.stats;
  figRows(document.querySelector("#store-stats tbody"), [
    ["packs", "packs", ss.packs], ["pinned", "pinned", ss.pinned], ["quarantined", "quarantined", ss.quarantined],
    ["chunks", "chunks", ss.chunks], ["bytes", "bytes", ss.bytes], ["block size", "block_tokens", ss.block_tokens],
    ["cache hit rate", "store_hit_rate", t.hit_rate], ["bytes saved (KV restored, not computed)", "bytes_saved", ss.bytes_saved],
  ]);
  document.getElementById("packs-note").textContent = st.store.error ? st.store.error
    : st.store.truncated ? "(the " + st.store.packs.length + " most recently used)" : "";
  document.querySelector("#packs tbody").replaceChildren(...st.store.packs.map(p =>
    el("tr", {"data-pack": p.id}, cell(p.id.slice(0, 12)), cell(p.model), cell(p.tokens, "num"), cell(fmtBytes(p.bytes), "num"),
      cell(new Date(p.last_use).toLocaleString()), cell(p.pinned ? "yes" : "no"), cell(p.source))));

  // Receipts.
  const rc = st.receipts;
  document.getElementById("receipts-total").replaceChildren("receipts kept: ", fig("receipts_total", rc.total),
    rc.truncated ? " (the newest " + rc.list.length + " shown)" : "");
  document.querySelector("#receipts tbody").replaceChildren(...rc.list.map(r =>
    el("tr", {"data-receipt": r.id}, cell(new Date(r.time).toLocaleString()), cell(r.reason), cell(r.pack ? r.pack.slice(0, 12) : "—"),
      cell(r.source), cell(r.detail),
      cell((r.fields || []).map(f => f.field + ": want " + f.want + ", got " + f.got).join("; ") || "—"))));

  renderNodes(st.nodes);
}

function renderNodes(n) {
  const root = document.getElementById("nodes");
  if (!n.cluster) {
    root.replaceChildren(el("p", {"data-tag": n.tag, id: "nodes-unavailable"}, el("span", {class: "tag tag-unavailable"}, "unavailable"), " " + n.reason));
    return;
  }
  const c = n.cluster;
  const ntag = () => el("span", {class: "tag tag-" + n.tag, "data-tag": n.tag, title: n.window || ""}, n.tag);
  const kids = [el("p", {id: "cluster"}, "cluster " + c.cluster_id.slice(0, 16) + " · this node ", el("b", {}, c.node),
    c.repl_addr ? " · replication on " + c.repl_addr : " · no replication listener", c.role ? " · role " + c.role : "")];
  if (c.producer) {
    const p = c.producer;
    kids.push(el("div", {class: "peer", "data-producer": p.name}, el("b", {}, "prefill producer " + p.name),
      " (fallback " + p.fallback + ") · last outcome: ", p.last ? p.last + " at " + when(p.last_time) : "unavailable: no request yet",
      p.last_error ? el("div", {}, "error: " + p.last_error) : null,
      el("div", {}, "outcomes since start: " + (Object.entries(p.outcomes).map(([k, v]) => k + " " + v).join(", ") || "none yet"), ntag())));
  }
  for (const p of c.peers) {
    const lp = p.last_push;
    kids.push(el("div", {class: "peer", "data-peer": p.name},
      el("b", {}, p.name), " " + (p.addr || "(no address: accepts only)") + (p.active ? "" : " · removed"),
      el("table", {class: "figs"}, el("tbody", {},
        ...[["queue", p.queue], ["pushed", p.pushed], ["refused", p.refused], ["retries", p.retries], ["dropped", p.dropped]]
          .map(([k, f]) => el("tr", {}, el("th", {}, k), el("td", {}, fig("peer-" + k, f)))))),
      el("div", {}, "last push: ", lp ? (lp.ok ? "ok" : "failed: " + lp.error) + " · pack " + lp.pack.slice(0, 12) + " · moved " +
        lp.moved_chunks + "/" + lp.chunks + " chunks (" + fmtBytes(lp.moved_bytes) + ") in " + lp.duration_ms.toFixed(1) + " ms at " + when(lp.time)
        : p.replicate_to ? "unavailable: none yet" : "unavailable: this node does not replicate to it", lp ? ntag() : null)));
  }
  root.replaceChildren(...kids);
}

// Polls are numbered as they start; an answer older than the one shown is
// dropped, so a slow poll never overwrites a newer state. body's
// data-poll-started and data-poll-shown say which (the browser test waits
// on them).
let pollStarted = 0, pollShown = 0;

async function poll() {
  const conn = document.getElementById("conn");
  const seq = ++pollStarted;
  document.body.dataset.pollStarted = String(seq);
  try {
    const r = await fetch(STATE_URL, {headers: adminHeaders(), cache: "no-store"});
    if (!r.ok) throw new Error("state: HTTP " + r.status + " " + (await r.text()));
    const st = await r.json();
    if (seq < pollShown) return;
    render(st);
    pollShown = seq;
    document.body.dataset.pollShown = String(seq);
    conn.dataset.state = "ok";
    conn.textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    conn.dataset.state = "error";
    conn.textContent = String(e.message || e);
  }
}

// Inference: one streamed chat completion with muser's timings.
function showRequestFigures(usage, tm) {
  const rows = [];
  const m = (label, name, v, unit) => rows.push([label, name, v === null || v === undefined
    ? {tag: "unavailable", unit: unit, reason: "did not run for this request"}
    : {tag: "measured", value: v, unit: unit, window: "this request", source: "server timings"}]);
  m("cached tokens", "cached_tokens", usage ? usage.prompt_tokens_details.cached_tokens : null, "tokens");
  m("prompt tokens", "prompt_tokens", usage ? usage.prompt_tokens : null, "tokens");
  m("completion tokens", "completion_tokens", usage ? usage.completion_tokens : null, "tokens");
  if (tm) {
    m("queue", "queue_ms", tm.queue_ms, "ms");
    m("remote prefill", "remote_prefill_ms", tm.remote_prefill_ms, "ms");
    m("restore", "restore_ms", tm.restore_ms, "ms");
    m("prefill (" + tm.prefill_tokens + " tokens)", "prefill_ms", tm.prefill_ms, "ms");
    m("time to first token", "ttft_ms", tm.ttft_ms, "ms");
    m("decode tokens/s", "decode_tokens_per_second", tm.decode_tokens_per_second, "tokens/s");
  }
  const tbody = document.querySelector("#req-figures tbody");
  figRows(tbody, rows);
  if (tm) tbody.append(el("tr", {"data-row": "prefill_at"}, el("th", {}, "prefill ran"),
    el("td", {}, el("span", {class: "fig", "data-figure": "prefill_at", "data-tag": "measured"}, tm.prefill_at),
      el("span", {class: "tag tag-measured"}, "measured · this request"))));
}

async function send(ev) {
  ev.preventDefault();
  const status = document.getElementById("req-status");
  const reply = document.getElementById("reply");
  const btn = document.getElementById("send");
  reply.textContent = "";
  status.dataset.state = "streaming";
  status.textContent = "streaming…";
  btn.disabled = true;
  const body = {
    messages: [{role: "user", content: document.getElementById("prompt").value}],
    max_tokens: Number(document.getElementById("max-tokens").value) || 64,
    temperature: Number(document.getElementById("temperature").value),
    stream: true, stream_options: {include_usage: true}, timings: true,
  };
  let usage = null, tm = null, text = "";
  try {
    const r = await fetch("/v1/chat/completions", {method: "POST", headers: {"Content-Type": "application/json", ...authHeaders()}, body: JSON.stringify(body)});
    if (!r.ok) throw new Error("HTTP " + r.status + ": " + (await r.text()));
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buf += dec.decode(value, {stream: true});
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i); buf = buf.slice(i + 2);
        for (const line of block.split("\n")) {
          if (!line.startsWith("data: ")) continue;
          const data = line.slice(6);
          if (data === "[DONE]") continue;
          const c = JSON.parse(data);
          if (c.error) throw new Error(c.error.message || JSON.stringify(c.error));
          for (const ch of c.choices || []) if (ch.delta && ch.delta.content) { text += ch.delta.content; reply.textContent = text; }
          if (c.usage) usage = c.usage;
          if (c.timings) tm = c.timings;
        }
      }
    }
    showRequestFigures(usage, tm);
    status.dataset.state = "done";
    status.textContent = "done";
  } catch (e) {
    status.dataset.state = "error";
    status.textContent = String(e.message || e);
  } finally {
    btn.disabled = false;
    poll();
  }
}
document.getElementById("chat-form").addEventListener("submit", send);

// Store buttons: the admin endpoint.
async function admin(path, body) {
  const status = document.getElementById("admin-status");
  const out = document.getElementById("admin-result");
  status.dataset.state = "running";
  status.textContent = path + " running…";
  out.dataset.op = path;
  try {
    const r = await fetch(path, {method: "POST", headers: {"Content-Type": "application/json", ...adminHeaders()}, body: JSON.stringify(body || {})});
    const txt = await r.text();
    let shown = txt;
    try { shown = JSON.stringify(JSON.parse(txt), null, 2); } catch (_) { /* not JSON: shown as is */ }
    out.textContent = shown;
    out.dataset.status = String(r.status);
    status.dataset.state = r.ok ? "done" : "error";
    status.textContent = path + ": HTTP " + r.status;
  } catch (e) {
    status.dataset.state = "error";
    status.textContent = String(e.message || e);
  }
  poll();
}
document.getElementById("verify").addEventListener("click", () => admin("/admin/v1/verify", {}));
document.getElementById("gc").addEventListener("click", () => {
  const v = document.getElementById("gc-max-bytes").value.trim();
  admin("/admin/v1/gc", v === "" ? {} : {max_bytes: Number(v)});
});

poll();
// A page in a background tab does not poll (each poll reads the ledger);
// it polls again as soon as it is shown.
setInterval(() => { if (!document.hidden) poll(); }, POLL_MS);
document.addEventListener("visibilitychange", () => { if (!document.hidden) poll(); });
