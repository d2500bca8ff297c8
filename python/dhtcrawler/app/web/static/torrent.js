"use strict";

// Builds {dirs: {name: node}, files: [{name, size}], size} from the flat path list.
function treeOf(files) {
  const root = {dirs: new Map(), files: [], size: 0};
  for (const f of files) {
    const parts = f.path.split("/");
    let node = root;
    node.size += f.size;
    for (const dir of parts.slice(0, -1)) {
      if (!node.dirs.has(dir)) node.dirs.set(dir, {dirs: new Map(), files: [], size: 0});
      node = node.dirs.get(dir);
      node.size += f.size;
    }
    node.files.push({name: parts[parts.length - 1], size: f.size});
  }
  return root;
}

function render(node, ul) {
  for (const [name, child] of [...node.dirs.entries()].sort((a, b) => a[0].localeCompare(b[0]))) {
    const li = el("li", null, "dir");
    const details = document.createElement("details");
    details.open = true;
    const summary = el("summary");
    summary.appendChild(el("span", name + "/", "path"));
    summary.appendChild(el("span", humanSize(child.size), "size"));
    details.appendChild(summary);
    const inner = el("ul");
    render(child, inner);
    details.appendChild(inner);
    li.appendChild(details);
    ul.appendChild(li);
  }
  for (const f of node.files) {
    const li = el("li", null, "file");
    li.appendChild(el("span", f.name, "path"));
    li.appendChild(el("span", humanSize(f.size), "size"));
    ul.appendChild(li);
  }
}

async function load() {
  const hash = decodeURIComponent(location.pathname.split("/").pop());
  let t;
  try {
    t = await getJSON("/api/v1/torrents/" + encodeURIComponent(hash));
  } catch (e) {
    document.getElementById("name").textContent = "Not found: " + e.message;
    return;
  }
  document.title = t.name + " · dhtcrawler";
  document.getElementById("name").textContent = t.name;
  document.getElementById("magnet").href = t.magnet;
  const facts = document.getElementById("facts");
  const rows = [
    ["Info hash v1", t.info_hash_v1 || "—"], ["Info hash v2", t.info_hash_v2 || "—"],
    ["Version", t.version || "unknown"], ["Size", humanSize(t.total_size) + " (" + t.total_size + " bytes)"],
    ["Files", String(t.num_files)], ["Piece length", t.piece_length == null ? "unknown" : humanSize(t.piece_length)],
    ["Private", t.private == null ? "unknown" : (t.private ? "yes" : "no")], ["First seen", day(t.first_seen)], ["Last seen", day(t.last_seen)],
    ["Times seen", String(t.times_seen)], ["Swarm (seeders / leechers)", swarm(t)],
  ];
  for (const [k, v] of rows) {
    facts.appendChild(el("dt", k));
    facts.appendChild(el("dd", v));
  }
  if (t.files_truncated) {
    document.getElementById("files-note").textContent =
        t.files.length < t.files_stored
          ? "The first " + t.files.length + " of " + t.num_files + " files are listed."
          : "The crawl stored " + t.files.length + " of its " + t.num_files + " files.";
  }
  render(treeOf(t.files), document.getElementById("tree"));
}

load();
