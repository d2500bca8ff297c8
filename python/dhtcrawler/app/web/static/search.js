"use strict";
const PAGE = 20;
const state = {q: "", sort: "relevance", offset: 0, type: "", resolution: "", year: ""};
const FACETS = ["type", "resolution", "year"];  // the selects; the API's facet names below
const FACET_OF = {type: "content_type", resolution: "resolution", year: "year"};
let seq = 0, timer = null;

function readURL() {
  const p = new URLSearchParams(location.search);
  state.q = p.get("q") || "";
  state.sort = p.get("sort") || "relevance";
  state.offset = Math.max(0, parseInt(p.get("offset") || "0", 10) || 0);
  for (const f of FACETS) state[f] = p.get(f) || "";
  document.getElementById("q").value = state.q;
  document.getElementById("sort").value = state.sort;
}

function writeURL() {
  const p = new URLSearchParams();
  if (state.q) p.set("q", state.q);
  if (state.sort !== "relevance") p.set("sort", state.sort);
  if (state.offset) p.set("offset", String(state.offset));
  for (const f of FACETS) if (state[f]) p.set(f, state[f]);
  const s = p.toString();
  history.replaceState(null, "", s ? "?" + s : location.pathname);
}

function row(t) {
  const tr = document.createElement("tr");
  const name = el("td");
  const a = el("a", t.name);
  a.href = "/torrent/" + t.info_hash;
  a.className = "name";
  name.appendChild(a);
  tr.appendChild(name);
  tr.appendChild(el("td", humanSize(t.total_size), "num"));
  tr.appendChild(el("td", String(t.num_files), "num"));
  tr.appendChild(el("td", day(t.first_seen)));
  tr.appendChild(el("td", day(t.last_seen)));
  tr.appendChild(el("td", swarm(t), "num swarm"));
  const m = el("td");
  const link = el("a", "magnet", "magnet");
  link.href = t.magnet;
  m.appendChild(link);
  tr.appendChild(m);
  return tr;
}

async function run() {
  const mine = ++seq;
  writeURL();
  const params = new URLSearchParams({q: state.q, sort: state.sort, limit: PAGE, offset: state.offset});
  for (const f of FACETS) if (state[f]) params.set(f, state[f]);
  const url = "/api/v1/search?" + params;
  const summary = document.getElementById("summary");
  let doc;
  try {
    doc = await getJSON(url);
  } catch (e) {
    if (mine === seq) summary.textContent = "Error: " + e.message;
    return;
  }
  if (mine !== seq) return;  // an answer to an older keystroke
  const body = document.querySelector("#results tbody");
  body.replaceChildren(...doc.results.map(row));
  const first = doc.total ? doc.offset + 1 : 0, last = doc.offset + doc.results.length;
  summary.textContent = doc.total + (doc.total === 1 ? " torrent" : " torrents") +
      (state.q ? " match “" + state.q + "”" : "") + (doc.total ? "; showing " + first + "–" + last : "");
  const pages = Math.max(1, Math.ceil(doc.total / PAGE));
  document.getElementById("page").textContent = "page " + (Math.floor(doc.offset / PAGE) + 1) + " of " + pages;
  document.getElementById("prev").disabled = doc.offset === 0;
  document.getElementById("next").disabled = last >= doc.total;
}

function soon() {
  clearTimeout(timer);
  timer = setTimeout(run, 150);
}

document.getElementById("q").addEventListener("input", (e) => {
  state.q = e.target.value.trim();
  state.offset = 0;
  soon();
});
document.getElementById("sort").addEventListener("change", (e) => {
  state.sort = e.target.value;
  state.offset = 0;
  run();
});
document.getElementById("prev").addEventListener("click", () => {
  state.offset = Math.max(0, state.offset - PAGE);
  run();
});
document.getElementById("next").addEventListener("click", () => {
  state.offset += PAGE;
  run();
});

// The facets: each value with its count (of every torrent served), as the selects' options.
getJSON("/api/v1/facets").then((doc) => {
  for (const f of FACETS) {
    const select = document.getElementById(f);
    for (const v of doc[FACET_OF[f]] || []) {
      const o = el("option", String(v.value).replace("_", " ") + " (" + v.count + ")");
      o.value = String(v.value);
      select.appendChild(o);
    }
    select.value = state[f];
  }
}).catch(() => {});
for (const f of FACETS) {
  document.getElementById(f).addEventListener("change", (e) => {
    state[f] = e.target.value;
    state.offset = 0;
    run();
  });
}

readURL();
run();
getJSON("/api/v1/stats").then((s) => {
  document.getElementById("stats").textContent = s.torrents + " torrents, " + s.files + " files, " +
      humanSize(s.total_size) + " in the database";
}).catch(() => {});
