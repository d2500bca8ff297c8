"use strict";
// Hand-written SVG: vertical bars for a series, horizontal bars for named counts.
const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text != null) e.textContent = text;
  return e;
}

function columns(id, values) {
  const w = 720, h = 140, max = Math.max(1, ...values), bw = w / values.length;
  const s = svg("svg", {viewBox: `0 0 ${w} ${h + 16}`, width: "100%", role: "img"});
  values.forEach((v, i) => {
    const bh = Math.round((v / max) * h);
    const r = svg("rect", {x: i * bw + 1, y: h - bh, width: Math.max(1, bw - 2), height: bh, class: "bar"});
    r.appendChild(svg("title", {}, String(v)));
    s.appendChild(r);
  });
  s.appendChild(svg("text", {x: 0, y: h + 14, class: "axis"}, "max " + max));
  document.getElementById(id).replaceChildren(s);
}

function rows(id, pairs) {
  const w = 720, rh = 22, max = Math.max(1, ...pairs.map((p) => p[1]));
  const s = svg("svg", {viewBox: `0 0 ${w} ${Math.max(1, pairs.length) * rh}`, width: "100%", role: "img"});
  pairs.forEach(([name, v], i) => {
    s.appendChild(svg("text", {x: 0, y: i * rh + 15, class: "label"}, name));
    s.appendChild(svg("rect", {x: 180, y: i * rh + 4, width: Math.max(1, (v / max) * (w - 260)), height: rh - 8,
                               class: "bar"}));
    s.appendChild(svg("text", {x: 186 + (v / max) * (w - 260), y: i * rh + 15, class: "value"}, String(v)));
  });
  document.getElementById(id).replaceChildren(s);
}

async function draw() {
  const d = await getJSON("/api/v1/dashboard");
  document.getElementById("updated").textContent = "at " + day(d.now);
  columns("per_minute", d.per_minute);
  columns("per_hour", d.per_hour);
  document.getElementById("size").textContent = d.torrents + " torrents, " + d.last_day +
      " stored in the last day; the database uses " + humanSize(d.database_bytes) + " (" +
      humanSize(d.torrent_bytes) + " of it the torrents)";
  const live = d.live;
  document.getElementById("live").hidden = !live;
  document.getElementById("no_live").hidden = !!live;
  if (!live) return;
  rows("funnel", live.funnel.map((f) => [f.stage, f.count]));
  rows("failures", Object.entries(live.failures));
  rows("pool", [...Object.entries(live.pool), ...Object.entries(live.refusals)]);
}

draw().catch((e) => { document.getElementById("updated").textContent = "Error: " + e.message; });
setInterval(() => draw().catch(() => {}), 10000);
