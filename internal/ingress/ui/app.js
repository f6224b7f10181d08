// Bub console: reads the ingress JSON API and taps a session's events.
// Every request carries the bearer token from sessionStorage; the live
// tap reads the SSE endpoint with fetch (EventSource cannot send headers).
"use strict";

const $ = (sel) => document.querySelector(sel);
const state = { session: "", page: { offset: 0, total: 0, limit: 50, tail: true }, q: "", tap: null, tapReady: Promise.resolve() };

// el builds an element; strings become text nodes (never HTML).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children.flat()) if (c != null) e.append(c);
  return e;
}

function headers() {
  const h = {};
  const t = sessionStorage.getItem("bub.token");
  if (t) h.Authorization = "Bearer " + t;
  return h;
}

function notice(msg) { $("#notice").textContent = msg || ""; }

// api fetches JSON; a non-2xx answer throws its {error, code} body.
async function api(path, opts = {}) {
  const res = await fetch(path, { ...opts, headers: { ...headers(), ...(opts.headers || {}) } });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) {
    const err = new Error(body.error || res.statusText);
    err.code = body.code || String(res.status);
    throw err;
  }
  return body;
}

function guarded(fn) {
  return async (...args) => {
    try { await fn(...args); } catch (e) {
      notice(e.code === "unauthorized" ? "A valid token is required: enter it above." : e.message);
    }
  };
}

// ---- sessions ----

const loadSessions = guarded(async () => {
  const { sessions } = await api("/v1/sessions");
  const ul = $("#sessions");
  ul.replaceChildren(...sessions.map((s) => el("li",
    { class: s.id === state.session ? "open" : "", title: s.id, onclick: () => openSession(s.id) },
    el("span", {}, s.id), el("span", { class: "muted" }, String(s.entries)))));
  if (!sessions.length) ul.append(el("li", { class: "empty" }, "no tapes yet"));
});

function openSession(id) {
  if (!id) return;
  state.session = id;
  state.page.tail = true;
  $("#session-input").value = id;
  $("#chat").replaceChildren();
  $("#events").replaceChildren();
  loadSessions();
  loadTape();
  state.tapReady = openTap(id);
}

// ---- tape ----

function gist(e) {
  const p = e.payload || {};
  const text = (v) => (typeof v === "string" ? v : JSON.stringify(v));
  switch (e.kind) {
    case "message": {
      let s = (p.role || "") + ": " + text(p.content ?? "");
      if (p.tool_calls) s += "  tool_calls=" + text(p.tool_calls);
      return s;
    }
    case "anchor": return (p.name || "-") + (p.state ? " " + text(p.state) : "");
    case "event": return (p.name || "") + (p.data ? " " + text(p.data) : "");
    default: return text(p);
  }
}

// marked renders s with every occurrence of q highlighted.
function marked(s, q) {
  if (!q) return [s];
  const out = [];
  const low = s.toLowerCase(), lq = q.toLowerCase();
  let i = 0, j;
  while ((j = low.indexOf(lq, i)) >= 0) {
    out.push(s.slice(i, j), el("mark", {}, s.slice(j, j + q.length)));
    i = j + q.length;
  }
  out.push(s.slice(i));
  return out;
}

function entryClass(e) {
  if (e.kind === "anchor") return "anchor";
  if (e.kind === "error") return "error";
  if (e.kind === "event" && e.payload && e.payload.name === "hook.decision") return "decision";
  return "";
}

const loadTape = guarded(async () => {
  if (!state.session) return;
  const p = new URLSearchParams({ limit: state.page.limit });
  if (!state.page.tail) p.set("offset", state.page.offset);
  if (state.q) p.set("q", state.q);
  let page;
  try {
    page = await api(`/v1/sessions/${encodeURIComponent(state.session)}/tape?${p}`);
  } catch (e) {
    if (e.code !== "no_tape") throw e;
    page = { total: 0, offset: 0, limit: state.page.limit, entries: [], anchors: [] };
  }
  Object.assign(state.page, { offset: page.offset, total: page.total });
  $("#tape-title").textContent = state.session;
  $("#tape-range").textContent = page.total
    ? `${page.offset + 1}–${page.offset + page.entries.length} of ${page.total}` : "empty";
  $("#tape-prev").disabled = $("#tape-first").disabled = page.offset === 0;
  $("#tape-next").disabled = $("#tape-last").disabled = page.offset + page.entries.length >= page.total;
  $("#anchors").replaceChildren(...page.anchors.map((a) => el("span",
    { class: "chip", title: `entry ${a.id}`, onclick: () => jumpTo(a.position) }, "⚓ " + (a.name || "-"))));
  const ol = $("#tape");
  ol.replaceChildren(...page.entries.map((e) => el("li",
    { class: entryClass(e), "data-id": e.id, title: "click to expand", onclick: (ev) => ev.currentTarget.classList.toggle("expanded") },
    el("span", { class: "id" }, String(e.id)),
    el("span", { class: "kind" }, e.kind),
    el("span", { class: "gist" }, marked(gist(e), state.q)))));
  if (!page.entries.length) ol.append(el("li", { class: "empty" }, state.q ? "no entry matches" : "no entries yet"));
  ol.scrollTop = state.page.tail ? ol.scrollHeight : 0;
  return page.total;
});

function jumpTo(position) {
  state.q = "";
  $("#tape-q").value = "";
  state.page.tail = false;
  state.page.offset = position;
  loadTape();
}

function turnPage(to) {
  const { offset, limit, total } = state.page;
  state.page.tail = to === "last";
  state.page.offset = { first: 0, prev: Math.max(0, offset - limit), next: offset + limit, last: 0 }[to];
  if (to === "next" && state.page.offset + limit >= total) state.page.tail = true;
  loadTape();
}

// ---- live tap ----

function short(type) { return type.replace(/^dev\.bub\./, "").replace(/\.v\d+$/, ""); }

function logEvent(label, detail, cls) {
  const ol = $("#events");
  const t = new Date().toLocaleTimeString();
  ol.append(el("li", { class: cls || "" }, el("span", { class: "t" }, t), label, detail ? " " + detail : ""));
  while (ol.children.length > 500) ol.firstChild.remove();
  ol.scrollTop = ol.scrollHeight;
}

// streaming returns the reply bubble a run's deltas go to.
function streaming(run) {
  let b = document.querySelector(`.bubble.reply[data-run="${CSS.escape(run)}"]`);
  if (!b) {
    b = el("div", { class: "bubble reply streaming", "data-run": run },
      el("span", { class: "reasoning" }), el("span", { class: "text" }));
    $("#chat").append(b);
  }
  return b;
}

// shownBytes counts, per turn, step and kind, the bytes of streamed text
// shown: a turn resumed after a worker crash streams the interrupted
// step again from offset 0 (docs/durable.md, "Streaming").
const shownBytes = new Map();

// unseen returns the part of a delta's text not shown yet.
function unseen(d) {
  const key = `${d.turn || d.run_id}/${d.step || 0}/${d.kind}`;
  const have = shownBytes.get(key) || 0;
  const bytes = new TextEncoder().encode(d.text);
  const off = d.offset || 0;
  if (off + bytes.length <= have) return "";
  shownBytes.set(key, off + bytes.length);
  return new TextDecoder().decode(bytes.slice(Math.max(0, have - off)));
}

function onTap(name, data) {
  if (name === "delta") {
    const d = JSON.parse(data);
    const b = streaming(d.run_id);
    b.querySelector(d.kind === "reasoning" ? ".reasoning" : ".text").append(unseen(d));
    $("#chat").scrollTop = $("#chat").scrollHeight;
    return;
  }
  let ev = {};
  try { ev = JSON.parse(data); } catch { /* shown by name only */ }
  const d = ev.data || {};
  let detail = "";
  if (name === "dev.bub.hook.decision.v1") detail = `${d.plugin} ${d.hook} → ${d.action}`;
  else if (name === "dev.bub.tool_call.started.v1") detail = d.name || "";
  else if (name === "dev.bub.envelope.outbound.v1") detail = (d.content || "").slice(0, 80);
  logEvent(short(name), detail, name === "dev.bub.hook.decision.v1" ? "decision" : "");
  if (name === "dev.bub.run.finished.v1") {
    const run = ev.runid;
    if (run) streaming(run).classList.remove("streaming");
    refreshTapeUntilGrown();
    loadStatus();
  }
}

// openTap starts reading the session's SSE stream (until another session
// is opened) and returns once the stream is subscribed, so nothing sent
// afterwards is missed.
function openTap(session) {
  if (state.tap) state.tap.abort();
  const ctl = new AbortController();
  state.tap = ctl;
  $("#tap-state").textContent = "connecting";
  return new Promise((subscribed) => {
    const read = async () => {
      const res = await fetch(`/v1/sessions/${encodeURIComponent(session)}/events`, { headers: headers(), signal: ctl.signal });
      if (!res.ok) throw new Error((await res.json().catch(() => ({}))).error || res.statusText);
      $("#tap-state").textContent = "open";
      subscribed();
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let name = "message", data = "";
          for (const line of block.split("\n")) {
            if (line.startsWith("event: ")) name = line.slice(7);
            else if (line.startsWith("data: ")) data += line.slice(6);
          }
          if (data) onTap(name, data);
        }
      }
      $("#tap-state").textContent = "closed";
    };
    read().catch((e) => {
      subscribed();
      if (!ctl.signal.aborted) $("#tap-state").textContent = "closed: " + e.message;
    });
  });
}

// refreshTapeUntilGrown reloads the newest tape page until the recorder
// committed the turn's entries (a few tries; the tape is written after the
// events that announce it).
async function refreshTapeUntilGrown() {
  const before = state.page.total;
  state.page.tail = true;
  for (let i = 0; i < 10; i++) {
    const total = await loadTape();
    if (total > before) break;
    await new Promise((r) => setTimeout(r, 300));
  }
  loadSessions();
}

const send = guarded(async (ev) => {
  ev.preventDefault();
  const content = $("#message").value.trim();
  if (!content) return;
  if (!state.session) openSession("console:" + Math.random().toString(36).slice(2, 8));
  await state.tapReady;
  $("#message").value = "";
  $("#chat").append(el("div", { class: "bubble user" }, content));
  const repliesBefore = document.querySelectorAll(".bubble.reply").length;
  const reply = await api("/v1/messages?wait=120s", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ content, session_id: state.session }),
  });
  if (reply.pending) notice("The reply is still being written; it will appear in the tap.");
  // The tap streamed the reply into a bubble of its run; a reply that was
  // not streamed (a comma command) gets its own bubble.
  for (const b of document.querySelectorAll(".bubble.reply.streaming")) b.classList.remove("streaming");
  if (document.querySelectorAll(".bubble.reply").length === repliesBefore) {
    for (const out of reply.outbounds || []) $("#chat").append(el("div", { class: "bubble reply" }, out.content));
  }
  refreshTapeUntilGrown();
});

// ---- status, hooks, interceptors ----

function table(cols, rows) {
  return el("table", {},
    el("thead", {}, el("tr", {}, cols.map(([h, , n]) => el("th", { class: n ? "n" : "" }, h)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, cols.map(([, f, n]) => el("td", { class: n ? "n" : "" }, String(f(r))))))));
}

function ago(t) {
  if (!t || t.startsWith("0001")) return "-";
  const s = Math.round((Date.now() - new Date(t)) / 1000);
  return s < 60 ? `${s}s ago` : s < 3600 ? `${Math.round(s / 60)}m ago` : `${Math.round(s / 3600)}h ago`;
}

// loadStatus reads the status once at a time (every finished run asks).
// mib renders a byte count as MiB ("-" when unknown).
const mib = (n) => (n ? (n / 1048576).toFixed(1) + " MiB" : "-");

let statusLoading = null;
function loadStatus() {
  statusLoading ??= readStatus().finally(() => { statusLoading = null; });
  return statusLoading;
}

const readStatus = guarded(async () => {
  const st = await api("/v1/status");
  const box = $("#status");
  const rec = st.recorder;
  const running = Object.values(st.workers.running_turns || {}).reduce((a, b) => a + b, 0);
  const dl = st.dead_letters;
  box.replaceChildren(
    el("div", { class: "muted" }, `NATS ${st.server.url} · server ${st.server.version} · max_payload ${mib(st.server.max_payload)}`),
    el("h3", {}, "Streams"),
    table([["name", (s) => s.name], ["messages", (s) => s.messages, 1], ["first", (s) => s.first_seq, 1],
      ["last", (s) => s.last_seq, 1], ["consumers", (s) => s.consumers, 1], ["last message", (s) => ago(s.last_time)]], st.streams || []),
    el("h3", {}, "Consumers"),
    table([["stream", (c) => c.stream], ["consumer", (c) => c.name], ["pending", (c) => c.pending, 1],
      ["ack pending", (c) => c.ack_pending, 1], ["redelivered", (c) => c.redelivered, 1], ["waiting", (c) => c.waiting, 1]], st.consumers || []),
    el("h3", {}, "Services"),
    (st.services || []).length
      ? table([["service", (v) => v.service], ["instance", (v) => v.instance], ["version", (v) => v.version],
        ["max_payload", (v) => mib(v.max_payload), 1], ["up since", (v) => ago(v.started)]], st.services)
      : el("div", { class: "muted" }, "no service running"),
    el("h3", {}, "Workers and recorder"),
    (st.workers.instances || []).length
      ? table([["worker", (w) => w.instance], ["version", (w) => w.version], ["running", (w) => w.running_turns, 1],
        ["concurrency", (w) => w.concurrency, 1], ["up since", (w) => ago(w.started)]], st.workers.instances)
      : el("div", { class: "muted" }, "no worker running"),
    el("div", {}, `running turns (turn registry): ${running} · pulls waiting: ${st.workers.waiting_pulls}`),
    el("div", { class: rec && rec.lag > 0 ? "lag-bad" : "" },
      rec ? `recorder lag: ${rec.lag} events (${rec.pending} not delivered, ${rec.ack_pending} held)` : "no recorder consumer"),
    el("h3", {}, "Dead letters"),
    el("div", {}, `${dl.messages}` + Object.entries(dl.by_reason || {}).map(([r, n]) => ` · ${r}: ${n}`).join("")),
    ...(st.errors || []).map((e) => el("div", { class: "warn" }, "warning: " + e)));
  const ics = st.interceptors || [];
  $("#interceptors").replaceChildren(ics.length
    ? table([["service", (i) => i.service], ["instance", (i) => i.id], ["hooks", (i) => (i.hooks || []).join(", ")],
      ["requests", (i) => i.requests, 1], ["errors", (i) => i.errors, 1],
      ["avg", (i) => (i.average_processing_time / 1e6).toFixed(2) + " ms", 1], ["up since", (i) => ago(i.started)]], ics)
    : el("div", { class: "empty" }, "no interceptor service is running"));
});

const loadHooks = async () => {
  const box = $("#hooks");
  try {
    const rep = await api("/v1/hooks");
    box.replaceChildren(el("div", { class: "muted" }, `as reported by worker ${rep.instance}`),
      ...rep.hooks.map((h) => el("div", { class: "hook" },
        el("span", { class: "name" }, h.hook),
        el("span", { class: "impls" }, h.impls.map((im, i) => el("span",
          { class: "impl" + (im.remote ? " remote" : ""), title: im.detail || "" },
          `${i + 1}. ${im.plugin}${im.remote ? " (remote: " + im.service + ")" : ""}`))),
        el("span", { class: "spec" }, `${h.kind} · ${h.phase} · ${h.order} order${h.isolated ? " · isolated" : ""}`))));
  } catch (e) {
    box.replaceChildren(el("div", { class: e.code === "no_worker" ? "empty" : "warn" },
      e.code === "no_worker" ? "No worker answered: hooks are known only while a worker runs." : e.message));
  }
};

function refreshAll() { loadSessions(); loadStatus(); loadHooks(); if (state.session) loadTape(); }

// ---- wiring ----

$("#token").value = sessionStorage.getItem("bub.token") || "";
$("#token-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem("bub.token", $("#token").value.trim());
  notice("");
  refreshAll();
  if (state.session) state.tapReady = openTap(state.session);
});
$("#session-form").addEventListener("submit", (ev) => { ev.preventDefault(); openSession($("#session-input").value.trim()); });
$("#tape-search").addEventListener("submit", (ev) => { ev.preventDefault(); state.q = $("#tape-q").value; state.page.tail = true; loadTape(); });
for (const to of ["first", "prev", "next", "last"]) $("#tape-" + to).addEventListener("click", () => turnPage(to));
$("#send-form").addEventListener("submit", send);
$("#sessions-refresh").addEventListener("click", loadSessions);
$("#status-refresh").addEventListener("click", loadStatus);
$("#hooks-refresh").addEventListener("click", loadHooks);
refreshAll();
