// pareto-atlas interactive page. Data arrive as JSON in <script id="atlas-data">; every string from
// the data is rendered with textContent / setAttribute (or, inside plotly, with < > & written as
// entities), never as HTML. One view per (model, workload): never two models' relative quality on
// one axis; several models of one workload meet only on the task's absolute score.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("atlas-data").textContent);
  // the points travel as columns (page_data.columnar): rebuild one object per point
  D.points = (function (c) {
    var out = [];
    for (var i = 0; i < c.n; i++) out.push({});
    Object.keys(c.num).forEach(function (k) { c.num[k].forEach(function (v, i) { out[i][k] = v; }); });
    Object.keys(c.text).forEach(function (k) {
      var t = c.text[k];
      t.codes.forEach(function (code, i) { out[i][k] = code < 0 ? null : t.values[code]; });
    });
    return out;
  })(D.points);
  var ALL = "all";
  var PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];
  var SHAPE = { measured: "diamond", simulated: "circle", prior: "square-open" };
  var LAT = ["tpot_p99_ms", "tpot_p50_ms", "ttft_p99_ms", "ttft_p50_ms", "e2e_p99_ms"];
  var DISCRETE_MAX = 4;   // at most this many distinct quality values: draw the guard's verdict instead

  function $(id) { return document.getElementById(id); }
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function esc(s) { return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"); }
  function num(v) { return typeof v === "number" && isFinite(v); }
  function fmt(v) {
    if (!num(v)) return v === null || v === undefined ? "n/a" : String(v);
    var a = Math.abs(v);
    if (a !== 0 && a < 0.001) return v.toExponential(1);
    if (a >= 1000) return Math.round(v).toLocaleString("en-US");
    var t = v.toPrecision(3);
    return t.indexOf(".") < 0 ? t : t.replace(/0+$/, "").replace(/\.$/, "");
  }
  // plain units: 5,840 tok/s, $0.17/Mtok, 12.3 ms
  function plain(v, col) {
    if (!num(v)) return "n/a";
    var u = D.units[col] || "";
    if (u === "$/Mtok") return "$" + fmt(v) + "/Mtok";
    if (col === "quality_rel") return fmt(v) + "× baseline";
    if (col === "throughput_per_device_tok_s") u = "tok/s/GPU";
    return fmt(v) + (u && u !== "x baseline" ? " " + u : "");
  }
  function fillSelect(sel, opts) {
    sel.textContent = "";
    opts.forEach(function (o) { sel.appendChild(new Option(o.label, o.value)); });
  }

  // ---- the views: one per (model, workload), then one comparison per shared workload ----
  var views = D.pairs.map(function (p) {
    return { value: "pair\u0001" + p.model + "\u0001" + p.workload, label: (p.model ? p.model + " · " : "") + p.workload,
             model: p.model, workload: p.workload, compare: false };
  });
  Object.keys(D.compare).forEach(function (w) {
    views.push({ value: "cmp\u0001" + w, label: "compare models on " + w + " (absolute score)", workload: w, compare: true });
  });
  fillSelect($("f-view"), views);
  fillSelect($("f-regime"), D.regimes.map(function (r) { return { value: r.name, label: r.name + (r.quality_floor ? " (floor " + fmt(r.quality_floor) + ")" : "") }; }));
  var firstFloor = D.regimes.filter(function (r) { return num(r.quality_floor); })[0];
  if (firstFloor) $("f-regime").value = firstFloor.name;
  fillSelect($("f-latency"), LAT.filter(function (c) { return D.points.some(function (p) { return num(p[c]); }); })
    .map(function (c) { return { value: c, label: c.replace(/_/g, " ").replace(" ms", "") + " (ms)" }; }));
  D.points.forEach(function (p, i) { p._i = i; });
  var byId = {};
  D.points.forEach(function (p) { byId[p.point_id] = p; });
  var cardColor = {};
  D.points.map(function (p) { return p.hardware; }).filter(function (h, i, a) { return a.indexOf(h) === i; }).sort()
    .forEach(function (h, i) { cardColor[h] = PALETTE[i % PALETTE.length]; });
  var confirmOf = {};
  D.projected.forEach(function (r) { if (!confirmOf[r.point_id]) confirmOf[r.point_id] = r.confirm_command; });

  function view() { return views.filter(function (v) { return v.value === $("f-view").value; })[0] || views[0]; }
  function regime() { var n = $("f-regime").value; return D.regimes.filter(function (r) { return r.name === n; })[0]; }
  function inView(p, v) { return p.workload === v.workload && (v.compare || (p.model || "") === (v.model || "")); }
  function viewPoints(v, withCard) {
    var hw = $("f-hardware").value, priors = $("f-priors").checked;
    return D.points.filter(function (p) {
      return inView(p, v) && (!withCard || hw === ALL || p.hardware === hw) && (priors || p.rests_on !== "prior");
    });
  }
  function cardsOf(v) {
    var seen = {};
    D.points.forEach(function (p) { if (inView(p, v)) seen[p.hardware] = 1; });
    return Object.keys(seen).sort();
  }
  function winnersOf(v) {
    return D.winners.filter(function (w) { return w.workload === v.workload && (v.compare || (w.model || "") === (v.model || "")); });
  }

  // ---- tooltip: configuration, load, every metric with its bar, what it rests on, how to confirm ----
  function bar(p, col, errCol) {
    var v = p[col];
    if (!num(v)) return "n/a";
    var e = p[errCol];
    return plain(v, col) + (p.provenance === "measured" ? " (measured)" : (num(e) && e ? " ± " + fmt(v * e) + " (" + fmt(100 * e) + " %)" : ""));
  }
  function tipRows(p) {
    var q = num(p.quality_rel) ? fmt(p.quality_rel) + " [" + fmt(p.quality_rel_lo) + ", " + fmt(p.quality_rel_hi) + "] 95 % CI" : "not scored";
    var rows = [["configuration", p.label], ["layout", p.layout || "one GPU"], ["model", p.model || ""], ["card", p.hardware],
      ["workload", p.workload], ["load", p.load || "n/a"], ["provenance", p.provenance], ["rests on", p.evidence],
      ["quality_rel", q], ["task score", num(p.quality) ? fmt(p.quality) + ((p.quality_benchmark || p.quality_task) ? " (" + (p.quality_benchmark || p.quality_task) + ")" : "") : "n/a"],
      ["KL vs baseline", num(p.kld) ? fmt(p.kld) + " [" + fmt(p.kld_lo) + ", " + fmt(p.kld_hi) + "] nats/token" : "not measured"],
      ["TTFT P99", bar(p, "ttft_p99_ms", "lat_rel_err")], ["TPOT P99", bar(p, "tpot_p99_ms", "lat_rel_err")],
      ["throughput", bar(p, "throughput_tok_s", "thr_rel_err")],
      ["per GPU", bar(p, "throughput_per_device_tok_s", "thr_rel_err") + (p.gpus > 1 ? " (" + p.gpus + " GPUs)" : "")],
      ["per user", plain(p.tok_s_per_user, "throughput_tok_s")],
      ["cost", plain(p.cost_per_mtok, "cost_per_mtok") + " at $" + fmt(p.price_per_hour) + "/h (" + (p.price_date || "") + ")"],
      ["speed model", p.provenance === "measured" ? "measured" : (p.calib_provenance || "simulated")],
      ["frontier", p.frontier_status + (p.dominated_by_label ? " (by " + p.dominated_by_label + ")" : "")]];
    if (p.rests_on === "prior") rows.push(["to confirm", p.confirm_command || confirmOf[p.point_id] || "measure its speed and quality on the engine"]);
    return rows;
  }
  function showTip(p, x, y) {
    var t = $("tooltip");
    t.textContent = "";
    t.setAttribute("data-point-id", p.point_id);
    t.appendChild(el("div", p.label, "tip-title"));
    tipRows(p).forEach(function (kv) {
      var d = el("div"); d.appendChild(el("b", kv[0] + ": ")); d.appendChild(document.createTextNode(String(kv[1]))); t.appendChild(d);
    });
    t.style.display = "block";
    var left = Math.min(x + 14, window.scrollX + document.documentElement.clientWidth - 460);
    t.style.left = Math.max(0, left) + "px";
    t.style.top = (y + 14) + "px";
  }
  function hideTip() { $("tooltip").style.display = "none"; }
  function hookTips(gd) {
    gd.on("plotly_hover", function (ev) {
      var pt = ev.points && ev.points[0];
      var p = pt && byId[pt.customdata];
      var e = ev.event || {};
      var r = gd.getBoundingClientRect();
      if (p) showTip(p, (e.pageX || (r.left + window.scrollX + (pt.xaxis ? pt.xaxis.l2p(pt.xaxis.d2l(pt.x)) + pt.xaxis._offset : 0))),
                     (e.pageY || (r.top + window.scrollY + (pt.yaxis ? pt.yaxis._offset : 0))));
    });
    gd.on("plotly_unhover", hideTip);
  }

  // ---- frontier geometry ----
  // the 2-D frontier of (x: lower is better, y: higher is better), sorted by x
  function front2(pts, fx, fy) {
    var s = pts.filter(function (p) { return num(fx(p)) && num(fy(p)); })
      .sort(function (a, b) { return fx(a) - fx(b) || fy(b) - fy(a); });
    var out = [], best = -Infinity;
    s.forEach(function (p) { if (fy(p) > best + 1e-12) { out.push(p); best = fy(p); } });
    return out;
  }
  // the frontier of two higher-is-better axes, sorted by x
  function frontMax(pts, fx, fy) {
    return front2(pts, function (p) { return -fx(p); }, fy).reverse();
  }
  function spansDecades(vals) {
    var v = vals.filter(function (x) { return num(x) && x > 0; });
    if (v.length < 2) return false;
    return Math.max.apply(null, v) / Math.min.apply(null, v) >= 10;   // a decade or more
  }
  function distinctCount(vals) {
    var seen = {};
    vals.forEach(function (v) { if (num(v)) seen[v.toFixed(3)] = 1; });
    return Object.keys(seen).length;
  }
  function shortLabel(s) { s = String(s || ""); return s.length > 28 ? s.slice(0, 27) + "…" : s; }

  var VERDICT_Y = { o: 0, b: 1, i: 2 };
  var VERDICT_TEXT = ["out", "boundary", "in"];
  function jitter(i) { return ((i * 2654435761) % 1000) / 1000 * 0.5 - 0.25; }

  // one quality chart: y is quality_rel, or the guard's verdict when quality takes few values
  function qualityChart(div, pts, xcol, xtitle, v) {
    var r = regime();
    var discrete = distinctCount(pts.map(function (p) { return p.quality_rel; })) <= DISCRETE_MAX && r && num(r.quality_floor);
    var g = r ? D.guard[r.name] : "";
    var fy = discrete ? function (p) { return VERDICT_Y[g.charAt(p._i)]; } : function (p) { return p.quality_rel; };
    var fyDraw = discrete ? function (p) { return fy(p) + jitter(p._i); } : fy;
    var fx = function (p) { return p[xcol]; };
    var drawn = pts.filter(function (p) { return num(fx(p)) && num(fy(p)) && fx(p) > 0; });
    // the frontier of the points that can win (evidence for quality and speed), and, dashed, the
    // projected one that counts the points resting on priors too, where it differs
    var front = front2(drawn.filter(function (p) { return p.rests_on !== "prior"; }), fx, fy);
    var projected = front2(drawn, fx, fy).filter(function (p) { return p.rests_on === "prior"; });
    var onFront = {};
    front.concat(projected).forEach(function (p) { onFront[p.point_id] = 1; });
    var traces = [], groups = {};
    drawn.forEach(function (p) {
      if (onFront[p.point_id]) return;
      var k = p.hardware + "\u0001" + p.rests_on;
      (groups[k] = groups[k] || []).push(p);
    });
    Object.keys(groups).sort().forEach(function (k) {
      var ps = groups[k], hw = ps[0].hardware, ro = ps[0].rests_on;
      traces.push({ type: "scatter", mode: "markers", name: esc(hw) + " · " + ro, legendgroup: hw,
        x: ps.map(fx), y: ps.map(fyDraw), customdata: ps.map(function (p) { return p.point_id; }),
        // the projected points (priors) recede: what can win stands out
        marker: { color: cardColor[hw], symbol: SHAPE[ro] || "circle", size: ro === "measured" ? 9 : (ro === "prior" ? 5 : 6),
                  opacity: ro === "prior" ? 0.22 : 0.45,
                  line: { width: ro === "measured" ? 1 : 0, color: "#000" } }, hoverinfo: "none" });
    });
    var xs = drawn.map(fx), xlog = spansDecades(xs);
    // the drawn y range: near the floor, not down to a collapsed arm at 0 (double-click shows all)
    var ys = drawn.map(fy), yTop = Math.max.apply(null, ys), yBot = Math.min.apply(null, ys), yRange = null;
    if (!discrete && r && num(r.quality_floor) && yBot < r.quality_floor - 0.15) {
      yBot = Math.min(r.quality_floor - 0.1, Math.min.apply(null, drawn.filter(function (p) { return fy(p) >= r.quality_floor - 0.1; }).map(fy)));
      yRange = [yBot - 0.02, yTop + 0.02 + 0.04 * (yTop - yBot)];
    }
    var below = yRange ? drawn.filter(function (p) { return fy(p) < yRange[0]; }).length : 0;
    // label the frontier points that have room: a label is ~a quarter of the plot wide and ~a tenth
    // high (with its leader line), so no two labelled points sit closer than that
    var xn = function (p) { var lo = Math.min.apply(null, xs), hi = Math.max.apply(null, xs), v = fx(p);
      return xlog ? (Math.log(v) - Math.log(lo)) / (Math.log(hi) - Math.log(lo) || 1) : (v - lo) / (hi - lo || 1); };
    var yn = function (p) { var lo = yRange ? yRange[0] : yBot, hi = yRange ? yRange[1] : yTop; return (fy(p) - lo) / (hi - lo || 1); };
    var labelled = [];
    front.forEach(function (p) {
      if (!yRange || fy(p) >= yRange[0]) {
        if (labelled.every(function (q) { return Math.abs(xn(p) - xn(q)) > 0.25 || Math.abs(yn(p) - yn(q)) > 0.12; })) labelled.push(p);
      }
    });
    var pLabelled = [];
    if (projected.length) {
      var pf = front2(drawn, fx, fy);
      pf.forEach(function (p) {
        if (p.rests_on === "prior" && (!yRange || fy(p) >= yRange[0]) && labelled.concat(pLabelled).every(function (q) {
          return Math.abs(xn(p) - xn(q)) > 0.25 || Math.abs(yn(p) - yn(q)) > 0.12; })) pLabelled.push(p);
      });
      traces.push({ type: "scatter", mode: "lines+markers", name: "projected frontier (priors)", line: { shape: "hv", color: "#888", width: 1, dash: "dot" },
        x: pf.map(fx), y: pf.map(fy), customdata: pf.map(function (p) { return p.point_id; }), hoverinfo: "none",
        marker: { size: 8, color: pf.map(function (p) { return cardColor[p.hardware]; }), symbol: pf.map(function (p) { return SHAPE[p.rests_on] || "circle"; }) } });
    }
    traces.push({ type: "scatter", mode: "lines+markers", name: "frontier", line: { shape: "hv", color: "#222", width: 1.5 },
      x: front.map(fx), y: front.map(fy), customdata: front.map(function (p) { return p.point_id; }),
      marker: { size: 11, color: front.map(function (p) { return cardColor[p.hardware]; }),
                symbol: front.map(function (p) { return SHAPE[p.rests_on] || "circle"; }), line: { width: 1.5, color: "#000" } },
      error_x: { type: "data", array: front.map(function (p) { return p.provenance === "measured" ? 0 : fx(p) * (p.lat_rel_err || 0); }),
                 visible: xcol !== "cost_per_mtok" || true, color: "#555", thickness: 1 },
      error_y: discrete ? { visible: false } : { type: "data", symmetric: false, color: "#555", thickness: 1,
                 array: front.map(function (p) { return num(p.quality_rel_hi) ? p.quality_rel_hi - p.quality_rel : 0; }),
                 arrayminus: front.map(function (p) { return num(p.quality_rel_lo) ? p.quality_rel - p.quality_rel_lo : 0; }) },
      hoverinfo: "none" });
    // the labels: annotations on a white ground (a log axis places them by log10 of the value)
    var note = function (p, i, projectedOne) {
      return { x: xlog ? Math.log10(fx(p)) : fx(p), y: fy(p), xref: "x", yref: "y", text: esc(shortLabel(p.label)) + (projectedOne ? " (projected)" : ""),
               showarrow: true, arrowhead: 0, arrowwidth: 1, arrowcolor: projectedOne ? "#999" : "#333",
               // all the same way, up (nothing lies above a frontier): labels keep their points' spacing
               ax: xn(p) > 0.7 ? -30 : 30, ay: -20, xanchor: xn(p) > 0.7 ? "right" : "left",
               bgcolor: "rgba(255,255,255,0.9)", bordercolor: projectedOne ? "#bbb" : "#333", borderpad: 2,
               font: { size: 11, color: projectedOne ? "#666" : "#111" } };
    };
    var notes = labelled.map(function (p, i) { return note(p, i, false); })
      .concat(pLabelled.map(function (p, i) { return note(p, i + 1, true); }));
    var layout = {
      annotations: notes,
      height: 520, margin: { l: 70, r: 30, t: 40, b: 60 }, hovermode: "closest", dragmode: "zoom",
      title: { text: esc((v.model ? v.model + " · " : "") + v.workload) + ": quality vs " + esc(xtitle), font: { size: 14 }, x: 0.01, xanchor: "left" },
      xaxis: { title: { text: esc(xtitle) + (below ? " — " + below + " points below the drawn quality range (double-click to see all)" : "") },
               type: xlog ? "log" : "linear", zeroline: false },
      yaxis: discrete
        ? { title: { text: "quality guard: " + esc(r.name) + " (floor " + fmt(r.quality_floor) + ")" }, tickvals: [0, 1, 2], ticktext: VERDICT_TEXT, range: [-0.6, 2.6] }
        : { title: { text: "quality relative to " + esc(v.model || "the model") + "'s baseline" }, zeroline: false,
            range: yRange || undefined, autorange: yRange ? false : true },
      legend: { orientation: "h", y: -0.18, font: { size: 11 } }, showlegend: true
    };
    div.setAttribute("data-y", discrete ? "verdict" : "quality_rel");
    div.setAttribute("data-frontier", front.length);
    return plot(div, traces, layout);
  }
  function plot(div, traces, layout) {
    var done = Plotly.react(div, traces, layout, { displaylogo: false, responsive: false, modeBarButtonsToRemove: ["toImage", "sendDataToCloud"] });
    if (!div._tipsHooked) { hookTips(div); div._tipsHooked = true; }
    return done;
  }

  function drawFrontier(v) {
    var pts = viewPoints(v, true);
    var lat = $("f-latency").value;
    var lw = lat.replace(/_/g, " ").replace(" ms", "").toUpperCase().replace("P", "P") + " (ms)";
    qualityChart($("chart-latency"), pts, lat, lw, v);
    qualityChart($("chart-cost"), pts, "cost_per_mtok", "cost ($/Mtok)", v);
    $("drawn-count").textContent = pts.length + " configurations in this view (" + D.n_points_drawn + " of " + D.n_points_total +
      " embedded over all views: every frontier, tied, measured and winning point plus a sample of the dominated).";
  }

  function drawTput(v) {
    var pts = viewPoints(v, true).filter(function (p) { return num(p.tok_s_per_user) && num(p.throughput_per_device_tok_s) && p.tok_s_per_user > 0; });
    var traces = [], cards = {};
    pts.forEach(function (p) { (cards[p.hardware] = cards[p.hardware] || []).push(p); });
    var fx = function (p) { return p.tok_s_per_user; }, fy = function (p) { return p.throughput_per_device_tok_s; };
    Object.keys(cards).sort().forEach(function (hw) {
      var ps = cards[hw], f = frontMax(ps, fx, fy);
      traces.push({ type: "scatter", mode: "markers", name: esc(hw) + " (all)", legendgroup: hw, showlegend: false, x: ps.map(fx), y: ps.map(fy),
        customdata: ps.map(function (p) { return p.point_id; }), hoverinfo: "none",
        marker: { color: cardColor[hw], size: 5, opacity: 0.25, symbol: ps.map(function (p) { return SHAPE[p.rests_on]; }) } });
      traces.push({ type: "scatter", mode: "lines+markers", name: esc(hw), legendgroup: hw, x: f.map(fx), y: f.map(fy),
        customdata: f.map(function (p) { return p.point_id; }), hoverinfo: "none", line: { color: cardColor[hw], width: 2 },
        marker: { color: cardColor[hw], size: 8, symbol: f.map(function (p) { return SHAPE[p.rests_on]; }) } });
    });
    var won = {}, ws = [];
    winnersOf(v).forEach(function (w) { var p = byId[w.point_id]; if (p && !won[p.point_id] && pts.indexOf(p) >= 0) { won[p.point_id] = 1; ws.push([p, w]); } });
    traces.push({ type: "scatter", mode: "markers+text", name: "regime winner", x: ws.map(function (a) { return fx(a[0]); }),
      y: ws.map(function (a) { return fy(a[0]); }), customdata: ws.map(function (a) { return a[0].point_id; }), hoverinfo: "none",
      text: ws.map(function (a) { return esc(a[1].regime); }), textposition: "top center", textfont: { size: 11 },
      marker: { symbol: "star", size: 16, color: "#ffd400", line: { color: "#000", width: 1 } } });
    var layout = { height: 540, margin: { l: 80, r: 30, t: 40, b: 60 }, hovermode: "closest",
      title: { text: esc((v.model ? v.model + " · " : "") + v.workload) + ": the throughput–interactivity curve per card", font: { size: 14 }, x: 0.01, xanchor: "left" },
      xaxis: { title: { text: "tokens/s per user (1000 / TPOT P50)" }, type: spansDecades(pts.map(fx)) ? "log" : "linear" },
      yaxis: { title: { text: "tokens/s per GPU" }, type: spansDecades(pts.map(fy)) ? "log" : "linear" },
      legend: { orientation: "v", font: { size: 11 } } };
    plot($("chart-tput"), traces, layout);
  }

  function drawCompare(v) {
    var pts = viewPoints(v, true).filter(function (p) { return num(p.quality) && num(p[$("f-latency").value]); });
    var lat = $("f-latency").value, traces = [], models = {};
    pts.forEach(function (p) { (models[p.model || ""] = models[p.model || ""] || []).push(p); });
    Object.keys(models).sort().forEach(function (m, i) {
      var ps = models[m], f = front2(ps, function (p) { return p[lat]; }, function (p) { return p.quality; });
      traces.push({ type: "scatter", mode: "markers", name: esc(m) + " (all)", legendgroup: m, showlegend: false,
        x: ps.map(function (p) { return p[lat]; }), y: ps.map(function (p) { return p.quality; }), customdata: ps.map(function (p) { return p.point_id; }),
        hoverinfo: "none", marker: { color: PALETTE[i % PALETTE.length], size: 5, opacity: 0.3 } });
      traces.push({ type: "scatter", mode: "lines+markers", name: esc(m), legendgroup: m, line: { shape: "hv", color: PALETTE[i % PALETTE.length] },
        x: f.map(function (p) { return p[lat]; }), y: f.map(function (p) { return p.quality; }), customdata: f.map(function (p) { return p.point_id; }),
        hoverinfo: "none", marker: { size: 9, color: PALETTE[i % PALETTE.length] } });
    });
    var task = (pts[0] && pts[0].quality_task) || "task score";
    plot($("chart-compare"), traces, { height: 540, margin: { l: 80, r: 30, t: 40, b: 60 }, hovermode: "closest",
      title: { text: esc(v.workload) + ": every model on " + esc(task) + " (absolute)", font: { size: 14 } },
      xaxis: { title: { text: esc(lat) }, type: spansDecades(pts.map(function (p) { return p[lat]; })) ? "log" : "linear" },
      yaxis: { title: { text: esc(task) + " (absolute score)" } } });
  }

  // ---- regime map: rows regimes, columns cards of this view (+ the best card) ----
  // (the comparison view: columns are the models, each cell its best card's winner)
  function drawRegimeMap(v) {
    var t = $("regime-map"), cards = cardsOf(v), ws = winnersOf(v);
    t.textContent = "";
    var cols = v.compare ? D.compare[v.workload] : (cards.length > 1 ? cards.concat([ALL]) : cards);
    var head = el("tr"); head.appendChild(el("th", "regime"));
    cols.forEach(function (c) { head.appendChild(el("th", !v.compare && c === ALL ? "best card" : c)); });
    var thead = el("thead"); thead.appendChild(head); t.appendChild(thead);
    var body = el("tbody");
    D.regimes.forEach(function (r) {
      var tr = el("tr"); tr.setAttribute("data-regime", r.name);
      var th = el("th", r.name); th.title = r.description; tr.appendChild(th);
      cols.forEach(function (c) {
        var w = ws.filter(function (x) {
          return x.regime === r.name && (v.compare ? (x.model || "") === c && x.hardware === ALL : x.hardware === c); })[0];
        var td = el("td", undefined, "cell");
        td.setAttribute("data-hardware", c);
        if (w && w.point_id) {
          var fig = w.objective === "throughput_tok_s" && num(w.throughput_per_device_tok_s) && byId[w.point_id] && byId[w.point_id].gpus > 1
            ? plain(w.value, w.objective) + " (" + plain(w.throughput_per_device_tok_s, "throughput_per_device_tok_s") + ")" : plain(w.value, w.objective);
          td.appendChild(el("div", fig, "fig"));
          var name = el("div", w.label + ((v.compare || c === ALL) && w.win_hardware ? " · " + w.win_hardware : ""), "win");
          name.title = w.label + (w.layout ? " — " + w.layout : "") + " — " + (w.evidence || "");
          td.appendChild(name);
          if (w.layout) td.appendChild(el("div", w.layout, "layout"));
          td.setAttribute("data-point-id", w.point_id);
          if (w.stack_beats_singles) td.classList.add("boxed");
        } else {
          td.appendChild(el("div", "none admitted", "none"));
          if (w) td.title = w.note || "";
        }
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    t.appendChild(body);
  }

  // ---- tables ----
  // a long text is clamped to 3 lines (CSS .clamp); its whole text is on hover and a click expands it
  function cellText(tr, text, cls, title) {
    var td;
    if (cls && cls.indexOf("clip3") >= 0) {
      td = el("td", undefined, cls);
      var d = el("div", text, "clamp");
      d.addEventListener("click", function () { d.classList.toggle("open"); });
      td.appendChild(d);
    } else td = el("td", text, cls);
    if (title) td.title = title;
    tr.appendChild(td);
    return td;
  }
  function drawWinners(v) {
    var hw = $("f-hardware").value, body = $("winners-body");
    body.textContent = "";
    winnersOf(v).forEach(function (w) {
      if (hw !== ALL && w.hardware !== hw && w.hardware !== ALL) return;
      var tr = el("tr", undefined, w.stack_beats_singles ? "boxed" : "");
      tr.setAttribute("data-regime", w.regime); tr.setAttribute("data-hardware", w.hardware);
      tr.setAttribute("data-workload", w.workload); tr.setAttribute("data-model", w.model || "");
      tr.setAttribute("data-point-id", w.point_id || "");
      var has = !!w.point_id;
      var err = w.provenance === "measured" || !has ? "" : " [" + fmt(w.value_lo) + ", " + fmt(w.value_hi) + "]";
      cellText(tr, w.regime); cellText(tr, w.model || "", "clip", w.model); cellText(tr, w.workload);
      cellText(tr, w.hardware + (w.hardware === ALL && w.win_hardware ? " → " + w.win_hardware : ""));
      cellText(tr, has ? w.label : "— none admitted", "label-cell clip", has ? w.label : w.note);
      cellText(tr, has ? (w.layout || "1 GPU") : "", "clip", w.layout);
      cellText(tr, has ? (w.load || "") : "");
      cellText(tr, has ? plain(w.value, w.objective) + err : "");
      cellText(tr, has && num(w.quality_rel) ? fmt(w.quality_rel) + " [" + fmt(w.quality_rel_lo) + ", " + fmt(w.quality_rel_hi) + "]" : "");
      cellText(tr, has ? w.evidence_short : "", "code", w.evidence);
      cellText(tr, has ? (w.stack_beats_singles ? "boxed" : (w.stacked ? "stack" : "single")) : "", "",
               w.best_single_label ? "best single: " + w.best_single_label + " (" + fmt(w.best_single_value) + ")" : "");
      cellText(tr, has ? (w.separated ? "yes" : "tied") : "", "", has && !w.separated ? "within error of " + (w.runner_up_label || "") : "");
      body.appendChild(tr);
    });
    var lg = $("evidence-legend"); lg.textContent = "";
    lg.appendChild(el("b", "evidence codes: "));
    Object.keys(D.evidence_legend).forEach(function (k) {
      var s = el("span"); s.appendChild(el("code", k)); s.appendChild(document.createTextNode(" " + D.evidence_legend[k])); lg.appendChild(s);
    });
  }
  function simpleTable(t, rows, cols, clipCols) {
    t.textContent = "";
    if (!rows.length) return;
    var h = el("tr"); cols.forEach(function (c) { h.appendChild(el("th", c[1])); });
    var thead = el("thead"); thead.appendChild(h); t.appendChild(thead);
    var body = el("tbody");
    rows.forEach(function (r) {
      var tr = el("tr");
      cols.forEach(function (c) {
        var v = typeof c[0] === "function" ? c[0](r) : r[c[0]];
        var text = num(v) ? fmt(v) : (v === null || v === undefined ? "" : String(v));
        cellText(tr, text, (clipCols || []).indexOf(c[1]) >= 0 ? "clip3" : "", text.length > 60 ? text : "");
      });
      body.appendChild(tr);
    });
    t.appendChild(body);
  }
  function interval(r, a, lo, hi) { return num(r[a]) ? fmt(r[a]) + (num(r[lo]) ? " [" + fmt(r[lo]) + ", " + fmt(r[hi]) + "]" : "") : ""; }
  function drawQuality() {
    var q = D.quality_table;
    $("quality-note").textContent = q.length ? "Each measured quality configuration: its task score, the paired difference from the baseline (exact McNemar p) and the KL divergence, each with its 95 % interval."
      : "No quality was measured in this study: quality rests on published scores or priors (see each point's evidence).";
    simpleTable($("quality-table"), q, [["task", "task"], ["arm", "arm"], [function (r) { return r.baseline ? "baseline" : ""; }, ""],
      [function (r) { return num(r.k) ? r.k + " / " + r.n : ""; }, "correct"], [function (r) { return interval(r, "rel", "rel_lo", "rel_hi"); }, "relative [95 %]"],
      [function (r) { return interval(r, "diff", "diff_lo", "diff_hi"); }, "difference [95 %]"], ["mcnemar_p", "McNemar p"],
      [function (r) { return interval(r, "kld", "kld_lo", "kld_hi"); }, "KL nats/token [95 %]"], ["top1", "same top-1"]]);
  }
  function drawClaims() {
    $("claims-block").style.display = D.claims.length ? "" : "none";
    simpleTable($("claims-table"), D.claims, [["id", "claim"], ["claim", "the paper says"], ["answer", "the product says"], ["verdict", "verdict"],
      ["evidence", "evidence / what would settle it"]], ["the paper says", "the product says", "evidence / what would settle it"]);
  }
  function drawProjected(v) {
    var hw = $("f-hardware").value, body = $("projected-body"), n = 0;
    body.textContent = "";
    D.projected.forEach(function (r) {
      if (r.workload !== v.workload || (!v.compare && (r.model || "") !== (v.model || "")) || (hw !== ALL && r.hardware !== hw)) return;
      var tr = el("tr"); tr.setAttribute("data-point-id", r.point_id); n++;
      cellText(tr, r.regime); cellText(tr, r.hardware); cellText(tr, r.label, "clip", r.label);
      cellText(tr, plain(r.value, r.objective)); cellText(tr, plain(r.winner_value, r.objective));
      cellText(tr, fmt(r.quality_rel) + " [" + fmt(r.quality_rel_lo) + ", " + fmt(r.quality_rel_hi) + "]");
      cellText(tr, r.evidence_short, "code", r.evidence); cellText(tr, r.confirm_command, "cmd clip3", r.confirm_command);
      body.appendChild(tr);
    });
    $("projected-note").textContent = n + " shown here (" + D.projected_total + " over all views, in projected.csv): they would beat a winner but rest on priors; measure them to confirm.";
  }
  function drawBoundary(v) {
    var hw = $("f-hardware").value, body = $("boundary-body"), n = 0;
    body.textContent = "";
    D.boundary.forEach(function (b) {
      if (b.workload !== v.workload || (!v.compare && b.model !== undefined && (b.model || "") !== (v.model || "")) || (hw !== ALL && b.hardware !== hw)) return;
      var tr = el("tr"); tr.setAttribute("data-point-id", b.point_id); n++;
      [b.regime, b.hardware, b.label, b.provenance, fmt(b.quality_rel) + " [" + fmt(b.quality_rel_lo) + ", " + fmt(b.quality_rel_hi) + "]",
       fmt(b.floor), b.effect].forEach(function (x, i) { cellText(tr, x, i === 2 ? "clip" : "", i === 2 ? x : ""); });
      body.appendChild(tr);
    });
    $("boundary-note").textContent = n + " boundary cases in this view (" + D.boundary_total + " in all, in boundary_cases.csv): on record, not admitted.";
  }

  function redraw(keepCard) {
    hideTip();
    var v = view();
    if (!keepCard) {
      var cur = $("f-hardware").value;
      fillSelect($("f-hardware"), [{ value: ALL, label: "all cards" }].concat(cardsOf(v).map(function (c) { return { value: c, label: c }; })));
      if (cardsOf(v).indexOf(cur) >= 0) $("f-hardware").value = cur;
    }
    $("view-note").textContent = v.compare
      ? "Comparing " + D.compare[v.workload].join(", ") + " on " + v.workload + "."
      : "One model, one workload: quality is relative to this model's own baseline.";
    $("view-frontier").style.display = v.compare ? "none" : "";
    $("view-tput").style.display = v.compare ? "none" : "";
    $("view-compare").style.display = v.compare ? "" : "none";
    if (v.compare) drawCompare(v); else { drawFrontier(v); drawTput(v); }
    drawRegimeMap(v); drawWinners(v); drawProjected(v); drawBoundary(v);
    document.body.setAttribute("data-view", v.value);
  }
  $("f-view").addEventListener("change", function () { redraw(false); });
  ["f-hardware", "f-regime", "f-latency", "f-priors"].forEach(function (id) { $(id).addEventListener("change", function () { redraw(true); }); });
  drawQuality(); drawClaims();
  redraw(false);
  document.body.setAttribute("data-ready", "1");
})();
