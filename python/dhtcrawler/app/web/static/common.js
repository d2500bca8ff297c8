"use strict";
// Shared by the pages. Every text from the database is hostile: set with textContent only.
function humanSize(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0, v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return i === 0 ? n + " B" : v.toFixed(1) + " " + units[i];
}
function day(rfc3339) { return rfc3339 ? rfc3339.replace("T", " ").replace("Z", "") : ""; }
function swarm(t) {
  return t.seeders == null || t.leechers == null ? "unknown" : t.seeders + " / " + t.leechers;
}
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text != null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}
async function getJSON(url) {
  const r = await fetch(url, {credentials: "same-origin"});
  const body = await r.json();
  if (!r.ok) throw new Error(body && body.error ? body.error.message : r.statusText);
  return body;
}
