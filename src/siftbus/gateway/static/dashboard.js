// The siftbus dashboard: one WebSocket to the gateway ("watch" sends a network snapshot
// every second); the rest are plain fetch() calls to the REST API. No build step.
"use strict";

const HISTORY = 300;               // points kept for the chart (five minutes at 1/s)
const history = [];                // {t, rate, p99}
let previous = null;               // the last snapshot, for rates
let positions = {};

const $ = (id) => document.getElementById(id);
const text = (el, value) => { el.textContent = String(value); };

function el(tag, attrs = {}, children = []) {
  const svg = ["svg", "g", "line", "circle", "text"].includes(tag);
  const e = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag)
                : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}

function layout(snap) {
  // a tree from the gateway's broker: depth = distance, spread evenly per level
  const adj = {};
  for (const name of Object.keys(snap.brokers)) adj[name] = [];
  for (const [a, b] of snap.edges) { adj[a].push(b); adj[b].push(a); }
  const levels = [[snap.gateway_broker]];
  const seen = new Set(levels[0]);
  while (true) {
    const next = [];
    for (const n of levels[levels.length - 1]) for (const m of adj[n] || []) {
      if (!seen.has(m)) { seen.add(m); next.push(m); }
    }
    if (!next.length) break;
    levels.push(next);
  }
  for (const n of Object.keys(adj)) if (!seen.has(n)) levels[levels.length - 1].push(n);
  const pos = {};
  levels.forEach((names, depth) => names.forEach((n, i) => {
    pos[n] = { x: 800 * (i + 1) / (names.length + 1), y: 45 + depth * 85 };
  }));
  return pos;
}

function linkFrames(stats, peer) {
  const lk = stats && stats.stats && stats.stats.links && stats.stats.links[peer];
  return lk ? lk.messages_in + lk.messages_out : 0;
}

function drawTopology(snap, dt) {
  positions = layout(snap);
  const svg = $("topology");
  svg.replaceChildren();
  for (const [a, b] of snap.edges) {
    const p = positions[a], q = positions[b];
    const now = linkFrames(snap.stats[a], b);
    const before = previous ? linkFrames(previous.stats[a], b) : now;
    const rate = dt > 0 ? Math.max(0, (now - before) / dt) : 0;
    svg.append(el("line", { class: "edge", x1: p.x, y1: p.y, x2: q.x, y2: q.y,
                            "data-link": `${a}-${b}` }));
    const label = el("text", { class: "edge-label", x: (p.x + q.x) / 2 + 6,
                               y: (p.y + q.y) / 2, "data-link-rate": `${a}-${b}` });
    text(label, `${rate.toFixed(1)} fr/s · ${now} fr`);
    svg.append(label);
  }
  for (const [name, p] of Object.entries(positions)) {
    const s = snap.stats[name] || {};
    const down = "error" in s;
    const cls = ["node", name === snap.gateway_broker ? "gateway" : "", down ? "down" : ""];
    const g = el("g", { class: cls.join(" ").trim(), "data-broker": name });
    g.append(el("circle", { cx: p.x, cy: p.y, r: 36 }));
    const t1 = el("text", { x: p.x, y: p.y - 2 }); text(t1, name);
    const t2 = el("text", { x: p.x, y: p.y + 13, "data-broker-info": name });
    text(t2, down ? "down" : `${s.stats.clients} cl / ${s.stats.table_size} pr`);
    g.append(t1, t2);
    svg.append(g);
  }
}

function sum(snap, key) {
  let total = 0;
  for (const s of Object.values(snap.stats)) if (s.stats) total += s.stats[key];
  return total;
}

function worst(snap, key) {
  let best = null;
  for (const s of Object.values(snap.stats)) if (s[key] != null) best = Math.max(best ?? 0, s[key]);
  return best;
}

function drawFigures(snap, dt) {
  const published = sum(snap, "events_published");
  const rate = previous && dt > 0 ? Math.max(0, (published - sum(previous, "events_published")) / dt) : 0;
  const p50 = worst(snap, "p50_ms"), p99 = worst(snap, "p99_ms");
  text($("events-total"), published);
  if (!previous || dt >= 0.5) text($("rate"), rate.toFixed(1));
  text($("notified-total"), sum(snap, "notifications"));
  text($("latency"), p50 == null ? "–" : `≤${p50} ms / ≤${p99} ms`);
  text($("dropped"), sum(snap, "dropped") + snap.gateway.dropped);
  if (previous && dt < 0.5) return;  // too close to the last sample for a rate
  // the first snapshot has no rate yet: a point there would be a spike (or a false zero)
  if (previous) history.push({ t: snap.time, rate, p99 });
  while (history.length > HISTORY) history.shift();
  drawChart();
}

function drawChart() {
  const c = $("chart"), ctx = c.getContext("2d");
  ctx.clearRect(0, 0, c.width, c.height);
  const top = Math.max(1, ...history.map((h) => h.rate));
  const lat = Math.max(1, ...history.map((h) => h.p99 || 0));
  ctx.strokeStyle = "#20324a"; ctx.beginPath();
  history.forEach((h, i) => {
    const x = c.width * i / HISTORY, y = c.height - 4 - (c.height - 8) * h.rate / top;
    i ? ctx.lineTo(x, y) : ctx.moveTo(x, y);
  });
  ctx.stroke();
  ctx.fillStyle = "#c05030";
  history.forEach((h, i) => {
    if (h.p99 == null) return;
    ctx.fillRect(c.width * i / HISTORY, c.height - 4 - (c.height - 8) * h.p99 / lat, 2, 2);
  });
  ctx.fillStyle = "#555"; ctx.fillText(`${top.toFixed(0)} ev/s`, 4, 12);
}

function drawSubscriptions(snap) {
  const types = new Set();
  for (const s of Object.values(snap.stats)) for (const t of Object.keys(s.by_type || {})) types.add(t);
  const cols = [...types].sort();
  const head = el("tr", {}, [el("th", {}, ["broker"]), ...cols.map((t) => el("th", {}, [t]))]);
  $("subs").tHead.replaceChildren(head);
  const rows = Object.entries(snap.stats).map(([name, s]) => el("tr", { "data-broker": name }, [
    el("td", {}, [name]),
    ...cols.map((t) => {
      const v = (s.by_type || {})[t];
      return el("td", { title: "local / from neighbours" }, [v ? `${v.local} / ${v.neighbour}` : "–"]);
    })]));
  $("subs").tBodies[0].replaceChildren(...rows);
}

function onSnapshot(snap) {
  const dt = previous ? snap.time - previous.time : 0;
  text($("setup"), `${snap.protocol}/${snap.strategy} · gateway at ${snap.gateway_broker}`);
  const select = $("table-broker");
  if (!select.options.length) {
    for (const name of Object.keys(snap.brokers)) select.append(el("option", { value: name }, [name]));
  }
  drawTopology(snap, dt);
  drawFigures(snap, dt);
  drawSubscriptions(snap);
  // a snapshot right after another (the one sent on connecting) would divide by a tiny dt
  if (!previous || dt >= 0.5) previous = snap;
}

// On a secured network every call carries the token (kept for this tab only); a
// WebSocket cannot send headers, so it goes in the query string there.
const token = () => sessionStorage.getItem("siftbus-token") || "";
let socket = null;

function connect() {
  const query = token() ? `?token=${encodeURIComponent(token())}` : "";
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/api/ws${query}`);
  socket = ws;
  ws.onopen = () => {
    $("status").className = "up"; text($("status"), "live");
    ws.send(JSON.stringify({ op: "watch", interval: 1 }));
  };
  ws.onmessage = (m) => {
    const msg = JSON.parse(m.data);
    if (msg.type === "network") onSnapshot(msg);
  };
  ws.onclose = () => {
    if (socket !== ws) return;  // replaced after a token change
    $("status").className = "down"; text($("status"), "disconnected, retrying…");
    setTimeout(connect, 2000);
  };
}

async function api(path, options = {}) {
  const headers = { ...(options.headers || {}) };
  if (token()) headers.authorization = `Bearer ${token()}`;
  const r = await fetch(path, { ...options, headers });
  const body = r.status === 204 ? null : await r.json();
  if (!r.ok) {
    const e = new Error(body && body.error ? body.error.message : `HTTP ${r.status}`);
    e.status = r.status; e.kind = body && body.error ? body.error.kind : "";
    throw e;
  }
  return body;
}

async function loadTable() {
  const name = $("table-broker").value;
  try {
    const t = await api(`/api/brokers/${encodeURIComponent(name)}/table?limit=50`);
    text($("table-summary"), `${name}: ${t.profiles} profiles, ${t.filters} filters, ${t.root_count} roots (${t.structure})`);
    $("roots").replaceChildren(...t.roots.map((r) =>
      el("li", {}, [`${r.filter}  ← ${r.subscribers.join(", ")} (${r.profiles} profile(s), covers ${r.covers})`])));
  } catch (e) { text($("table-summary"), e.message); }
}

async function explain(ev) {
  ev.preventDefault();
  const out = $("explain-result");
  try {
    const event = JSON.parse($("explain-event").value);
    const r = await api("/api/explain", { method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ profile: $("explain-profile").value, event }) });
    const rows = r.conditions.map((c) => el("tr", {}, [el("td", {}, [c.condition]), el("td", {}, [c.event_value]),
      el("td", { class: c.holds ? "yes" : "no" }, [c.holds ? "yes" : "no"])]));
    out.replaceChildren(el("table", {}, rows), el("p", { class: r.matches ? "yes" : "no" }, [r.summary]));
  } catch (e) { out.replaceChildren(el("p", { class: "no" }, [e.message])); }
}

async function loadChannels() {
  try {
    const list = await api("/api/channels");
    $("channels").replaceChildren(...(list.length ? list.map((c) =>
      el("li", {}, [`channel ${c.id}: ${c.consumer_admins.length} consumer admin(s), ${c.supplier_admins.length} supplier admin(s)`]))
      : [el("li", {}, ["no channel"])]));
    $("channels").closest("section").hidden = false;
  } catch (e) {
    // a broker without a channel service has no panel; other failures are shown
    const absent = e.status === 404 || /no (such )?service|unknown service|channel service/i.test(e.message);
    $("channels").closest("section").hidden = absent;
    $("channels").replaceChildren(el("li", {}, [`channels: ${e.message}`]));
  }
}

$("token").value = token();
$("token").addEventListener("change", () => {
  sessionStorage.setItem("siftbus-token", $("token").value.trim());
  if (socket) { const old = socket; socket = null; old.close(); }
  connect();
  loadChannels();
});
$("table-load").addEventListener("click", loadTable);
$("explain-form").addEventListener("submit", explain);
connect();
loadChannels();
setInterval(loadChannels, 10000);
