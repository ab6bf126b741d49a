// rlmx trace report: draws the summary, the timeline and the call tree from the embedded JSON.
// The tree is rendered lazily: a node's children exist in the DOM only once it is expanded, and long
// child lists are shown in chunks. All trace text goes through textContent, never innerHTML.
(function () {
  "use strict";
  var t0 = performance.now();
  var DATA = JSON.parse(document.getElementById("rlmx-data").textContent);
  var NODES = DATA.nodes, S = DATA.summary, TL = DATA.timeline;
  var CHUNK = 100, MAX_HITS = 200;
  var KIND_NAMES = { rlm: "rlm", turn: "turn", call: "model", cell: "code", batch: "batch", sub: "sub-call", note: "note" };
  var els = {}; // node index -> its .node element, once rendered
  var shown = {}; // node index -> how many children are rendered
  var haystack = null; // lower-cased search text per node, built on the first search

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function money(v) {
    if (v === null || v === undefined) return "cost unknown";
    if (v === 0) return "$0";
    return v >= 0.0001 ? "$" + v.toFixed(4) : "$" + v.toExponential(2);
  }
  function num(v) { return v === null || v === undefined ? "–" : Number(v).toLocaleString("en-US"); }

  // --- summary ---------------------------------------------------------------------------------
  function card(parent, key, value, extra) {
    var c = el("div", "card" + (extra ? " " + extra : ""));
    c.appendChild(el("div", "k", key));
    c.appendChild(el("div", "v", value));
    parent.appendChild(c);
  }
  function drawSummary() {
    var box = document.getElementById("summary");
    document.getElementById("run-id").textContent = S.run_id ? "run " + S.run_id : "";
    card(box, "stopped by", S.finished ? S.stopped_by : "run did not finish");
    card(box, "root turns", num(S.iterations));
    card(box, "model calls", num(S.calls));
    card(box, "input tokens", num(S.input_tokens) + (S.cached_tokens ? " (" + num(S.cached_tokens) + " cached)" : ""));
    card(box, "output tokens", num(S.output_tokens));
    card(box, "cost", money(S.cost_usd));
    card(box, "time", (S.elapsed_s !== null && S.elapsed_s !== undefined ? S.elapsed_s : S.duration_s) + " s");
    card(box, "models", S.model + (S.sub_model && S.sub_model !== S.model ? " / " + S.sub_model : ""));
    card(box, "depth reached", num(S.depth_max));
    card(box, "trace events", num(S.events));
    (S.warnings || []).forEach(function (w) { card(box, "warning", w, "wide warn"); });
    card(box, "question", S.question, "wide");
    card(box, "answer", S.answer === null || S.answer === undefined ? "(no answer)" : S.answer, "wide");
  }

  // --- tree ------------------------------------------------------------------------------------
  function hasBody(i) { var n = NODES[i]; return n.ch.length > 0 || (n.x && n.x.length > 0); }
  function makeNode(i) {
    var n = NODES[i];
    var box = el("div", "node s-" + n.s);
    box.setAttribute("role", "treeitem");
    box.dataset.i = i; box.dataset.kind = n.k;
    if (n.d !== undefined) box.dataset.depth = n.d;
    var row = el("div", "row");
    row.appendChild(el("span", "tog", hasBody(i) ? "▸" : ""));
    row.appendChild(el("span", "kind k-" + n.k, KIND_NAMES[n.k] || n.k));
    row.appendChild(el("span", "label", n.l));
    row.appendChild(el("span", "meta", n.m || ""));
    row.appendChild(el("span", "cost", n.k === "note" ? "" : money(n.c)));
    row.addEventListener("click", function () { toggle(i); });
    box.appendChild(row);
    els[i] = box;
    return box;
  }
  function isOpen(i) { return !!(els[i] && els[i].classList.contains("open")); }
  function open(i) {
    var box = els[i], n = NODES[i];
    if (!box || isOpen(i)) return;
    box.classList.add("open");
    box.setAttribute("aria-expanded", "true");
    box.firstChild.firstChild.textContent = hasBody(i) ? "▾" : "";
    if (n.x && n.x.length) {
      var det = el("div", "details");
      n.x.forEach(function (sec) {
        var s = el("div", "sec");
        s.appendChild(el("b", null, sec[0]));
        s.appendChild(el("pre", null, sec[1]));
        det.appendChild(s);
      });
      box.appendChild(det);
    }
    var kids = el("div", "kids");
    kids.setAttribute("role", "group");
    box.appendChild(kids);
    shown[i] = 0;
    more(i, CHUNK);
  }
  function more(i, count) {
    var box = els[i], n = NODES[i], kids = box.querySelector(":scope > .kids");
    var old = kids.querySelector(":scope > .more-btn");
    if (old) old.remove();
    var end = Math.min(n.ch.length, shown[i] + count);
    var frag = document.createDocumentFragment();
    for (var k = shown[i]; k < end; k++) frag.appendChild(makeNode(n.ch[k]));
    kids.appendChild(frag);
    shown[i] = end;
    if (end < n.ch.length) {
      var btn = el("button", "more-btn", "show " + Math.min(CHUNK, n.ch.length - end) + " more (" + (n.ch.length - end) + " left)");
      btn.type = "button";
      btn.addEventListener("click", function () { more(i, CHUNK); });
      kids.appendChild(btn);
    }
  }
  function close(i) {
    var box = els[i];
    if (!box || !isOpen(i)) return;
    box.classList.remove("open");
    box.setAttribute("aria-expanded", "false");
    box.firstChild.firstChild.textContent = hasBody(i) ? "▸" : "";
    forget(i);
    while (box.childNodes.length > 1) box.removeChild(box.lastChild);
  }
  function forget(i) { // rendered descendants are dropped with their parent
    var n = NODES[i];
    for (var k = 0; k < (shown[i] || 0); k++) { var c = n.ch[k]; if (els[c]) { forget(c); delete els[c]; } }
    delete shown[i];
  }
  function toggle(i) { if (isOpen(i)) close(i); else open(i); }

  function reveal(i) {
    var chain = [];
    for (var p = i; p >= 0; p = NODES[p].p) chain.unshift(p);
    for (var k = 0; k < chain.length - 1; k++) {
      var a = chain[k], next = chain[k + 1];
      open(a);
      var pos = NODES[a].ch.indexOf(next);
      if (pos >= shown[a]) more(a, pos - shown[a] + 1);
    }
    open(i);
    var box = els[i];
    if (!box) return;
    box.scrollIntoView({ block: "center" });
    box.classList.add("flash");
    setTimeout(function () { box.classList.remove("flash"); }, 1600);
  }

  // --- search ----------------------------------------------------------------------------------
  function buildHaystack() {
    haystack = NODES.map(function (n) {
      var parts = [n.l, n.m || ""];
      (n.x || []).forEach(function (s) { parts.push(s[1]); });
      return parts.join("\n").toLowerCase();
    });
  }
  function path(i) {
    var names = [];
    for (var p = NODES[i].p; p >= 0; p = NODES[p].p) {
      var k = NODES[p].k;
      if (k === "rlm" || k === "turn") names.unshift(k === "rlm" ? (NODES[p].d ? "child d" + NODES[p].d : "root") : NODES[p].l);
    }
    return names.join(" › ");
  }
  function search(q) {
    var box = document.getElementById("results"), count = document.getElementById("search-count");
    box.textContent = "";
    q = q.trim().toLowerCase();
    if (!q) { box.hidden = true; count.textContent = ""; return; }
    if (!haystack) buildHaystack();
    var hits = 0;
    for (var i = 0; i < NODES.length; i++) {
      if (haystack[i].indexOf(q) < 0) continue;
      hits++;
      if (hits <= MAX_HITS) {
        var row = el("div", "hit");
        row.appendChild(el("span", "kind k-" + NODES[i].k, KIND_NAMES[NODES[i].k]));
        row.appendChild(document.createTextNode(" " + NODES[i].l + "  "));
        row.appendChild(el("span", "meta", path(i)));
        row.dataset.i = i;
        row.addEventListener("click", (function (j) { return function () { reveal(j); }; })(i));
        box.appendChild(row);
      }
    }
    if (hits > MAX_HITS) box.appendChild(el("div", "more", (hits - MAX_HITS) + " more matches; refine the search"));
    count.textContent = hits + (hits === 1 ? " match" : " matches");
    box.hidden = hits === 0;
  }

  // --- timeline --------------------------------------------------------------------------------
  var COLORS = ["#3b6fd8", "#8a4fd6", "#2f9e6b"];
  function drawTimeline() {
    var canvas = document.getElementById("timeline");
    var depths = (S.depth_max || 0) + 1, lane = 22, pad = 18;
    var width = canvas.clientWidth || 800, height = depths * lane + pad;
    var ratio = window.devicePixelRatio || 1;
    canvas.width = width * ratio; canvas.height = height * ratio; canvas.style.height = height + "px";
    var ctx = canvas.getContext("2d");
    ctx.scale(ratio, ratio);
    var span = Math.max(S.duration_s || 0, 1e-3);
    TL.forEach(function (t) { if (t[1] > span) span = t[1]; });
    var left = 46, scale = (width - left - 8) / span;
    ctx.font = "11px sans-serif"; ctx.fillStyle = "#667085";
    for (var d = 0; d < depths; d++) ctx.fillText("depth " + d, 2, d * lane + 15);
    var digits = span < 1 ? 2 : span < 10 ? 1 : 0;
    for (var s = 0; s <= 4; s++) ctx.fillText((span * s / 4).toFixed(digits) + "s", left + (width - left - 40) * s / 4, height - 4);
    TL.forEach(function (t) {
      var x = left + t[0] * scale, w = Math.max(1, (t[1] - t[0]) * scale);
      var y = t[2] * lane + (t[3] === 2 ? 12 : 3);
      ctx.fillStyle = COLORS[t[3]];
      ctx.fillRect(x, y, w, t[3] === 2 ? 7 : 8);
    });
    canvas.onclick = function (ev) {
      var r = canvas.getBoundingClientRect(), x = ev.clientX - r.left, d = Math.floor((ev.clientY - r.top) / lane);
      var at = (x - left) / scale, best = -1, bestGap = Infinity;
      TL.forEach(function (t) {
        if (t[2] !== d) return;
        var gap = at < t[0] ? t[0] - at : at > t[1] ? at - t[1] : 0;
        if (gap < bestGap) { bestGap = gap; best = t[4]; }
      });
      if (best >= 0) reveal(best);
    };
  }

  // --- start -----------------------------------------------------------------------------------
  drawSummary();
  var tree = document.getElementById("tree");
  NODES.forEach(function (n, i) { if (n.p < 0) tree.appendChild(makeNode(i)); });
  if (NODES.length) open(0);
  drawTimeline();
  var timer = null;
  document.getElementById("search").addEventListener("input", function (ev) {
    clearTimeout(timer);
    var q = ev.target.value;
    timer = setTimeout(function () { search(q); }, 150);
  });
  document.getElementById("collapse-all").addEventListener("click", function () {
    NODES.forEach(function (n, i) { if (n.p < 0) { close(i); open(i); } });
  });
  window.addEventListener("resize", function () { drawTimeline(); });
  window.rlmxReport = { reveal: reveal, open: open, close: close, search: search, nodes: NODES };
  window.rlmxRenderMs = performance.now() - t0;
  document.body.dataset.ready = "1";
})();
