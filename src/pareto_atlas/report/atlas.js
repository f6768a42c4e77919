// pareto-atlas interactive page. Data arrive as JSON in <script id="atlas-data">; every string
// from the data is rendered with textContent / setAttribute, never as HTML.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("atlas-data").textContent);
  var SVGNS = "http://www.w3.org/2000/svg";
  var COLOR = { frontier: "#1f6fb4", tied: "#e08a1e", dominated: "#b8b8b8", excluded: "#e6e6e6" };
  var ALL = "all";

  function $(id) { return document.getElementById(id); }
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function svg(tag, attrs) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs) if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, String(attrs[k]));
    return e;
  }
  function fmt(v) {
    if (v === null || v === undefined || (typeof v === "number" && !isFinite(v))) return "n/a";
    if (typeof v !== "number") return String(v);
    var a = Math.abs(v);
    if (a !== 0 && (a < 0.01 || a >= 1e5)) return v.toExponential(2);
    var t = v.toPrecision(4);
    // strip trailing zeros of a fraction only: 1000 stays 1000, 2.500 becomes 2.5
    return t.indexOf(".") < 0 || t.indexOf("e") >= 0 ? t : t.replace(/0+$/, "").replace(/\.$/, "");
  }
  function fillSelect(sel, values, withAll) {
    sel.textContent = "";
    if (withAll) sel.appendChild(new Option("all", ALL));
    values.forEach(function (v) { sel.appendChild(new Option(v.label || v, v.value || v)); });
  }
  function uniq(key) {
    var seen = {}, out = [];
    D.points.forEach(function (p) { if (!seen[p[key]]) { seen[p[key]] = 1; out.push(p[key]); } });
    return out.sort();
  }

  // ---- controls ----
  var axes = D.axes.map(function (a) { return { value: a, label: a + (D.units[a] ? " (" + D.units[a] + ")" : "") }; });
  fillSelect($("x-axis"), axes, false);
  fillSelect($("y-axis"), axes, false);
  $("x-axis").value = D.default_x;
  $("y-axis").value = D.default_y;
  fillSelect($("f-hardware"), uniq("hardware"), true);
  fillSelect($("f-workload"), uniq("workload"), true);
  fillSelect($("f-model"), uniq("model"), true);
  fillSelect($("f-regime"), D.regimes.map(function (r) { return r.name; }), true);

  function state() {
    return { x: $("x-axis").value, y: $("y-axis").value, hw: $("f-hardware").value, wl: $("f-workload").value,
             model: $("f-model").value,
             regime: $("f-regime").value, logx: $("log-x").checked, clip: $("clip-x").checked };
  }
  function visible(p, s) {
    return (s.hw === ALL || p.hardware === s.hw) && (s.wl === ALL || p.workload === s.wl) &&
           (s.model === ALL || (p.model || "") === s.model);
  }

  // ---- scatter ----
  var W = 760, H = 440, M = { l: 70, r: 20, t: 14, b: 50 };
  function ticks(lo, hi, n, log) {
    var out = [];
    if (log) {
      for (var e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
        [1, 2, 5].forEach(function (m) { var v = m * Math.pow(10, e); if (v >= lo && v <= hi) out.push(v); });
      }
      return out;
    }
    var step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n || 1)));
    [1, 2, 5, 10].some(function (m) { if ((hi - lo) / (step * m) <= n) { step = step * m; return true; } return false; });
    for (var v = Math.ceil(lo / step) * step; v <= hi + 1e-12; v += step) out.push(v);
    return out;
  }
  function drawScatter() {
    var s = state(), root = $("scatter");
    root.textContent = "";
    var pts = D.points.filter(function (p) {
      return visible(p, s) && typeof p[s.x] === "number" && typeof p[s.y] === "number" && (!s.logx || p[s.x] > 0);
    });
    var winnerIds = {};
    D.winners.forEach(function (w) { if (w.point_id && (s.regime === ALL || w.regime === s.regime)) winnerIds[w.point_id] = true; });
    // Frontier region: the x range of the frontier, tied and winning points (a few slow outliers
    // would otherwise squeeze the frontier into one pixel column); points beyond it are counted.
    var outside = 0;
    if (s.clip) {
      var key = pts.filter(function (p) { return p.frontier_status === "frontier" || p.frontier_status === "tied" || winnerIds[p.point_id]; })
        .map(function (p) { return p[s.x]; });
      if (key.length) {
        var k0 = Math.min.apply(null, key), k1 = Math.max.apply(null, key);
        var lo = s.logx ? k0 / 1.5 : k0 - 0.15 * (k1 - k0 || Math.abs(k0) || 1);
        var hi = s.logx ? k1 * 1.5 : k1 + 0.15 * (k1 - k0 || Math.abs(k1) || 1);
        var kept = pts.filter(function (p) { return p[s.x] >= lo && p[s.x] <= hi; });
        outside = pts.length - kept.length;
        pts = kept;
      }
    }
    var chart = svg("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img" });
    chart.appendChild(svg("title", {})).textContent = s.y + " vs " + s.x;
    root.appendChild(chart);
    $("drawn-count").textContent = pts.length + " points shown (" + D.n_points_total + " in the table, " +
      D.n_points_drawn + " embedded: every frontier, tied, measured and winning point plus a sample of the dominated)" +
      (outside ? "; " + outside + " outside the frontier region (untick 'frontier region' to see them)" : "");
    if (!pts.length) return;
    var xs = pts.map(function (p) { return p[s.x]; }), ys = pts.map(function (p) { return p[s.y]; });
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs), y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);
    if (x0 === x1) { x0 = x0 * 0.9 - 1e-9; x1 = x1 * 1.1 + 1e-9; }
    if (y0 === y1) { y0 = y0 * 0.9 - 1e-9; y1 = y1 * 1.1 + 1e-9; }
    var padY = (y1 - y0) * 0.05; y0 -= padY; y1 += padY;
    if (!s.logx) { var padX = (x1 - x0) * 0.05; x0 -= padX; x1 += padX; } else { x0 /= 1.2; x1 *= 1.2; }
    var fx = s.logx
      ? function (v) { return M.l + (Math.log(v) - Math.log(x0)) / (Math.log(x1) - Math.log(x0)) * (W - M.l - M.r); }
      : function (v) { return M.l + (v - x0) / (x1 - x0) * (W - M.l - M.r); };
    var fy = function (v) { return H - M.b - (v - y0) / (y1 - y0) * (H - M.t - M.b); };
    ticks(x0, x1, 8, s.logx).forEach(function (t) {
      chart.appendChild(svg("line", { x1: fx(t), x2: fx(t), y1: M.t, y2: H - M.b, class: "grid" }));
      chart.appendChild(svg("text", { x: fx(t), y: H - M.b + 16, "text-anchor": "middle", class: "tick" })).textContent = fmt(t);
    });
    ticks(y0, y1, 6, false).forEach(function (t) {
      chart.appendChild(svg("line", { x1: M.l, x2: W - M.r, y1: fy(t), y2: fy(t), class: "grid" }));
      chart.appendChild(svg("text", { x: M.l - 6, y: fy(t) + 4, "text-anchor": "end", class: "tick" })).textContent = fmt(t);
    });
    chart.appendChild(svg("text", { x: (W + M.l) / 2, y: H - 10, "text-anchor": "middle", class: "axis" })).textContent = $("x-axis").selectedOptions[0].textContent;
    chart.appendChild(svg("text", { x: 16, y: H / 2, "text-anchor": "middle", class: "axis", transform: "rotate(-90 16 " + H / 2 + ")" })).textContent = $("y-axis").selectedOptions[0].textContent;
    var admitted = s.regime === ALL ? null : D.admitted[s.regime] || {};
    var order = { excluded: 0, dominated: 1, tied: 2, frontier: 3 };
    pts.sort(function (a, b) { return (order[a.frontier_status] - order[b.frontier_status]) || ((a.provenance === "measured") - (b.provenance === "measured")); });
    pts.forEach(function (p) {
      var meas = p.provenance === "measured";
      var prior = p.rests_on === "prior" || p.provenance === "prior";
      var c = svg(prior ? "rect" : "circle", {
        fill: COLOR[p.frontier_status] || "#999", stroke: meas ? "#000" : "none", "stroke-width": meas ? 1.6 : 0,
        "data-point-id": p.point_id, "data-rests-on": p.rests_on || p.provenance, class: "pt" + (meas ? " measured" : "")
      });
      var cx = fx(p[s.x]), cy = fy(p[s.y]), r = meas ? 5.5 : 3.5;
      if (prior) { c.setAttribute("x", cx - r); c.setAttribute("y", cy - r); c.setAttribute("width", 2 * r); c.setAttribute("height", 2 * r); }
      else { c.setAttribute("cx", cx); c.setAttribute("cy", cy); c.setAttribute("r", r); }
      if (admitted && !admitted[p.point_id]) c.setAttribute("opacity", "0.12");
      c.addEventListener("mouseenter", function (ev) { showTip(p, ev); });
      c.addEventListener("mouseleave", hideTip);
      chart.appendChild(c);
      if (winnerIds[p.point_id]) chart.appendChild(svg("circle", { cx: cx, cy: cy, r: r + 4, fill: "none", stroke: "#c0392b", "stroke-width": 2, class: "winner-ring" }));
    });
  }

  // ---- tooltip ----
  function pm(p, col, errCol) {
    var v = p[col];
    if (typeof v !== "number") return "n/a";
    var e = p[errCol];
    return fmt(v) + (e ? " ± " + fmt(v * e) + " (" + fmt(100 * e) + " %)" : " (measured, no model error)");
  }
  function showTip(p, ev) {
    var t = $("tooltip");
    t.textContent = "";
    t.appendChild(el("div", p.label, "tip-title"));
    [["model", p.model || ""], ["hardware", p.hardware], ["workload", p.workload], ["provenance", p.provenance],
     ["quality provenance", p.quality_provenance], ["rests on", p.evidence || p.provenance],
     ["KL divergence vs baseline", typeof p.kld === "number" ? fmt(p.kld) + " [" + fmt(p.kld_lo) + ", " + fmt(p.kld_hi) + "] nats/token" + (typeof p.top1 === "number" ? ", same top-1 token " + fmt(100 * p.top1) + " %" : "") : "not measured"],
     ["speed model", p.provenance === "measured" ? "measured" : (p.calib_provenance || "")], ["frontier status", p.frontier_status + (p.dominated_by_label ? " (by " + p.dominated_by_label + ")" : "")],
     ["optimizations", p.optimizations || "(baseline)"],
     ["quality_rel", fmt(p.quality_rel) + " [" + fmt(p.quality_rel_lo) + ", " + fmt(p.quality_rel_hi) + "] 95 % CI"],
     ["TTFT P99 ms", pm(p, "ttft_p99_ms", "lat_rel_err")], ["TPOT P99 ms", pm(p, "tpot_p99_ms", "lat_rel_err")],
     ["throughput tok/s", pm(p, "throughput_tok_s", "thr_rel_err")], ["cost $/Mtok", fmt(p.cost_per_mtok) + " at $" + fmt(p.price_per_hour) + "/h (" + p.price_date + ")"]
    ].forEach(function (kv) { var d = el("div"); d.appendChild(el("b", kv[0] + ": ")); d.appendChild(document.createTextNode(String(kv[1]))); t.appendChild(d); });
    t.style.display = "block";
    t.style.left = (ev.pageX + 14) + "px";
    t.style.top = (ev.pageY + 14) + "px";
  }
  function hideTip() { $("tooltip").style.display = "none"; }

  // ---- tables ----
  function drawWinners() {
    var s = state(), body = $("winners-body");
    body.textContent = "";
    D.winners.forEach(function (w) {
      if (s.regime !== ALL && w.regime !== s.regime) return;
      if (s.wl !== ALL && w.workload !== s.wl) return;
      if (s.model !== ALL && (w.model || "") !== s.model) return;
      if (s.hw !== ALL && w.hardware !== s.hw && w.hardware !== ALL) return;
      var tr = el("tr", undefined, w.stack_beats_singles ? "boxed" : "");
      tr.setAttribute("data-regime", w.regime);
      tr.setAttribute("data-hardware", w.hardware);
      tr.setAttribute("data-workload", w.workload);
      tr.setAttribute("data-model", w.model || "");
      tr.setAttribute("data-point-id", w.point_id || "");
      var err = w.provenance === "measured" || !w.point_id ? "" : " [" + fmt(w.value_lo) + ", " + fmt(w.value_hi) + "]";
      [w.regime, w.model || "", w.workload, w.hardware, w.point_id ? w.label : "— " + w.note, w.point_id ? (w.load || "") : "", w.provenance || "",
       w.point_id ? fmt(w.value) + err : "", w.point_id ? fmt(w.quality_rel) + " [" + fmt(w.quality_rel_lo) + ", " + fmt(w.quality_rel_hi) + "]" : "",
       w.point_id ? (w.evidence || "") : "",
       w.point_id ? (w.stack_beats_singles ? "yes (stack beats every single)" : (w.stacked ? "stack" : "single/baseline")) : "",
       w.point_id ? (w.separated ? "yes" : "within error of " + (w.runner_up_label || "")) : ""
      ].forEach(function (v, i) { var td = el("td", v); if (i === 4) td.className = "label-cell"; tr.appendChild(td); });
      body.appendChild(tr);
    });
  }
  function drawBoundary() {
    var s = state(), body = $("boundary-body");
    body.textContent = "";
    D.boundary.forEach(function (b) {
      if (s.regime !== ALL && b.regime !== s.regime) return;
      if (s.wl !== ALL && b.workload !== s.wl) return;
      if (s.hw !== ALL && b.hardware !== s.hw) return;
      var tr = el("tr");
      tr.setAttribute("data-point-id", b.point_id);
      [b.regime, b.hardware, b.label, b.provenance, fmt(b.quality_rel) + " [" + fmt(b.quality_rel_lo) + ", " + fmt(b.quality_rel_hi) + "]",
       fmt(b.floor), "on record, not admitted (the interval straddles the floor)", b.effect
      ].forEach(function (v) { tr.appendChild(el("td", v)); });
      body.appendChild(tr);
    });
    $("boundary-note").textContent = D.boundary_total > D.boundary.length
      ? D.boundary.length + " of " + D.boundary_total + " boundary cases shown (those that change or could change a winner first); all are in boundary_cases.csv"
      : D.boundary.length + " boundary cases";
  }
  function drawProjected() {
    var s = state(), body = $("projected-body");
    body.textContent = "";
    D.projected.forEach(function (r) {
      if (s.regime !== ALL && r.regime !== s.regime) return;
      if (s.wl !== ALL && r.workload !== s.wl) return;
      if (s.hw !== ALL && r.hardware !== s.hw) return;
      var tr = el("tr");
      tr.setAttribute("data-point-id", r.point_id);
      [r.regime, r.hardware, r.label, fmt(r.value), fmt(r.winner_value),
       fmt(r.quality_rel) + " [" + fmt(r.quality_rel_lo) + ", " + fmt(r.quality_rel_hi) + "]", r.evidence, r.confirm_command
      ].forEach(function (v) { tr.appendChild(el("td", v)); });
      body.appendChild(tr);
    });
    $("projected-note").textContent = (D.projected_total > D.projected.length
      ? D.projected.length + " of " + D.projected_total : String(D.projected.length)) +
      " configurations would beat a winner but rest on priors (all in projected.csv); measure them to confirm.";
  }
  function redraw() { hideTip(); drawScatter(); drawWinners(); drawBoundary(); drawProjected(); }
  ["x-axis", "y-axis", "f-hardware", "f-workload", "f-model", "f-regime", "log-x", "clip-x"].forEach(function (id) { $(id).addEventListener("change", redraw); });
  redraw();
  document.body.setAttribute("data-ready", "1");
})();
