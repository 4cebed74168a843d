// plumb's charts: draws the time charts of a report page with uPlot (embedded before this
// script). The data block (#plumb-charts) holds every sample of every run and every series.
// One run: the x axis is wall-clock time in the chosen time zone; several runs: time since each
// run's start, so they overlay. Hover shows a tooltip with the values; dragging zooms every
// chart to the same window, double-click zooms out; the legend hides and shows series; marks
// are dashed lines with labels placed in rows so they never overlap.
(function () {
  "use strict";
  var el = document.getElementById("plumb-charts");
  if (!el || typeof uPlot === "undefined") return;
  var D = JSON.parse(el.textContent);
  var WALL = D.runs.length === 1;
  var UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  var charts = [];
  var syncing = false;
  var ready = false;
  var LOCAL = (Intl.DateTimeFormat().resolvedOptions().timeZone) || "local";
  var tzName = LOCAL;

  function pad(n, w) { var s = String(n); while (s.length < (w || 2)) s = "0" + s; return s; }
  function fix(v, dec) { return v.toFixed(dec); }
  function trim(s) { return s.indexOf(".") < 0 ? s : s.replace(/0+$/, "").replace(/\.$/, ""); }
  function byteUnit(v) {
    var k = 0;
    while (k < UNITS.length - 1 && Math.abs(v) >= Math.pow(1024, k + 1)) k++;
    return k;
  }
  // Decimals that keep a step of `step` distinct.
  function decFor(step) {
    if (!isFinite(step) || step <= 0) return 0;
    return Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9)));
  }

  // One value, for the tooltip: three significant digits or so, in the unit that reads best.
  var FMT = {
    pct: function (v) { return trim(fix(v, Math.abs(v) < 10 ? 2 : 1)) + "%"; },
    count: function (v) {
      var a = Math.abs(v);
      if (a >= 1e6) return trim(fix(v / 1e6, 2)) + "M";
      if (a >= 1e4) return trim(fix(v / 1e3, 1)) + "k";
      return trim(fix(v, a < 10 ? 2 : a < 100 ? 1 : 0));
    },
    bytes: function (v) {
      var k = byteUnit(v), x = v / Math.pow(1024, k);
      return trim(fix(x, k === 0 ? 0 : Math.abs(x) < 10 ? 2 : 1)) + " " + UNITS[k];
    },
    byte_rate: function (v) { return FMT.bytes(v) + "/s"; },
    ms: function (v) {
      var a = Math.abs(v);
      if (a >= 1000) return trim(fix(v / 1000, 2)) + " s";
      if (a >= 1 || a === 0) return trim(fix(v, a < 10 ? 2 : 1)) + " ms";
      return trim(fix(v * 1000, 1)) + " µs";
    }
  };
  FMT.per_s = FMT.count;

  // Axis ticks: every tick of an axis in one unit, with the decimals its step needs.
  function axisValues(code, log) {
    return function (u, splits, ai, space, incr) {
      if (log) return splits.map(function (v) { return v == null ? null : FMT[code](v); });
      var max = 0;
      splits.forEach(function (v) { if (v != null && isFinite(v)) max = Math.max(max, Math.abs(v)); });
      var div = 1, suffix = "";
      if (code === "bytes" || code === "byte_rate") {
        var k = byteUnit(max);
        div = Math.pow(1024, k);
        suffix = " " + UNITS[k] + (code === "byte_rate" ? "/s" : "");
      } else if (code === "pct") {
        suffix = "%";
      } else if (code === "ms") {
        if (max >= 1000) { div = 1000; suffix = " s"; } else { suffix = " ms"; }
      } else if (max >= 1e6) {
        div = 1e6; suffix = "M";
      } else if (max >= 1e4) {
        div = 1e3; suffix = "k";
      }
      var dec = decFor(incr / div);
      return splits.map(function (v) { return v == null ? null : fix(v / div, dec) + suffix; });
    };
  }
  // Steps that are round in binary units: 1, 2, 5, 10… of B, KiB, MiB, GiB…
  var BYTE_INCRS = [];
  [0, 1, 2, 3, 4, 5].forEach(function (k) {
    [1, 2, 5, 10, 20, 50, 100, 200, 500].forEach(function (m) { BYTE_INCRS.push(m * Math.pow(1024, k)); });
  });
  BYTE_INCRS.sort(function (a, b) { return a - b; });
  var REL_INCRS = [0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200,
    10800, 21600, 43200, 86400, 172800, 604800];

  function tzDate(ts) {
    return tzName === LOCAL ? new Date(ts * 1000) : uPlot.tzDate(new Date(ts * 1000), tzName);
  }
  // This computer's offset from UTC now.
  function localOffset() {
    var m = -new Date().getTimezoneOffset();
    var s = m < 0 ? "-" : "+";
    m = Math.abs(m);
    return "UTC" + s + pad(Math.floor(m / 60)) + ":" + pad(m % 60);
  }
  function ymd(d) { return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()); }
  function hms(d, ms) {
    var s = pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
    return ms ? s + "." + pad(d.getMilliseconds(), 3) : s;
  }
  function rel(s, frac) {
    var neg = s < 0; s = Math.abs(s);
    var h = Math.floor(s / 3600), m = Math.floor(s / 60) % 60, sec = s - Math.floor(s / 60) * 60;
    var ss = frac ? (sec < 10 ? "0" : "") + sec.toFixed(1) : pad(Math.floor(sec));
    return (neg ? "-" : "+") + (h ? h + ":" + pad(m) : m) + ":" + ss;
  }
  function timeValues(u, splits, ai, space, incr) {
    if (!WALL) return splits.map(function (s) { return s == null ? null : rel(s, incr < 1); });
    var prev = null;
    return splits.map(function (s) {
      if (s == null) return null;
      var d = tzDate(s), day = ymd(d);
      var t = incr < 1 ? hms(d, true) : incr < 60 ? hms(d) : pad(d.getHours()) + ":" + pad(d.getMinutes());
      var lab = day !== prev ? (incr >= 86400 ? day : t + "\n" + day) : (incr >= 86400 ? day : t);
      prev = day;
      return lab;
    });
  }
  // Milliseconds in the tooltip's time only when samples come faster than one a second.
  var SUBSECOND = D.runs.some(function (r) { return r.t.length > 1 && r.t[1] - r.t[0] < 1000; });
  function timeText(x) {
    if (!WALL) return rel(x, SUBSECOND) + " since start";
    var d = tzDate(x);
    return ymd(d) + " " + hms(d, SUBSECOND) + " " + (tzName === LOCAL ? localOffset() : tzName);
  }
  function xOf(run, tS) { return WALL ? D.runs[run].start_ms / 1000 + tS : tS; }

  var xCache = {};
  function xs(run) {
    if (!xCache[run]) {
      var r = D.runs[run], base = WALL ? r.start_ms : 0;
      xCache[run] = r.t.map(function (t) { return (base + t) / 1000; });
    }
    return xCache[run];
  }

  // The chart's values: [x, series...], the runs joined on x when several are overlaid.
  function rawData(c) {
    var runs = [];
    c.series.forEach(function (s) { if (runs.indexOf(s.run) < 0) runs.push(s.run); });
    var fix0 = function (s) { return s.v; };
    if (runs.length <= 1) {
      return [xs(runs.length ? runs[0] : 0)].concat(c.series.map(fix0));
    }
    var col = [], tables = runs.map(function (r, ti) {
      var t = [xs(r)];
      c.series.forEach(function (s, si) { if (s.run === r) { col[si] = [ti, t.length]; t.push(fix0(s)); } });
      return t;
    });
    var joined = uPlot.join(tables);
    var start = [1];
    tables.forEach(function (t, ti) { start[ti + 1] = start[ti] + t.length - 1; });
    return [joined[0]].concat(c.series.map(function (s, si) {
      return joined[start[col[si][0]] + col[si][1] - 1];
    }));
  }

  // Areas stacked on the shown areas before them; a hidden area lies on the one below it, so
  // the fill above it still starts from the right place.
  function stacked(c, raw, shown) {
    var n = raw[0].length, acc = new Array(n).fill(0), out = [raw[0]];
    c.series.forEach(function (s, k) {
      var v = raw[k + 1];
      if (!s.area) { out.push(v); return; }
      var col = new Array(n);
      for (var i = 0; i < n; i++) {
        if (v[i] === undefined) { col[i] = undefined; continue; }
        if (shown[k] && v[i] != null) acc[i] += v[i];
        col[i] = v[i] == null && shown[k] ? null : acc[i];
      }
      out.push(col);
    });
    return out;
  }

  function tipPlugin(c, raw) {
    var tip, hovered = false;
    return {
      hooks: {
        init: function (u) {
          tip = document.createElement("div");
          tip.className = "pc-tip";
          u.over.appendChild(tip);
          u.over.addEventListener("mouseenter", function () { hovered = true; });
          u.over.addEventListener("mouseleave", function () { hovered = false; tip.style.display = "none"; });
        },
        setCursor: function (u) {
          var i = u.cursor.idx;
          if (!hovered || i == null || u.cursor.left < 0) { tip.style.display = "none"; return; }
          var x = u.data[0][i];
          var h = "<b>" + esc(timeText(x)) + "</b>";
          c.series.forEach(function (s, k) {
            if (!u.series[k + 1].show) return;
            var v = raw[k + 1][i];
            if (v == null) return;
            var f = FMT[s.right ? c.y2_fmt : c.y_fmt] || FMT.count;
            h += "<br><i style=\"background:" + s.color + "\"></i>" + esc(s.name) + ": <b>" + esc(f(v)) + "</b>";
          });
          c.marks.forEach(function (m) {
            var px = u.valToPos(xOf(m.run, m.t), "x");
            if (Math.abs(px - u.cursor.left) <= 4) h += "<br><span class=\"mk\">mark: " + esc(m.label) + "</span>";
          });
          tip.innerHTML = h;
          tip.style.display = "block";
          var w = tip.offsetWidth, ow = u.over.clientWidth;
          var left = u.cursor.left + 14;
          if (left + w > ow) left = Math.max(0, u.cursor.left - 14 - w);
          tip.style.left = left + "px";
          tip.style.top = Math.max(0, Math.min(u.cursor.top + 10, u.over.clientHeight - tip.offsetHeight)) + "px";
        }
      }
    };
  }
  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (ch) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;" }[ch];
    });
  }

  // Marks: a dashed line each; labels in up to three rows under the top edge, each label in the
  // first row where it overlaps nothing (right of its line, or left of it at the right edge).
  // A label with no room is left out; hovering the line names it.
  function drawMarks(c, u) {
    u.plumbLabels = [];
    if (!c.marks.length) return;
    var ctx = u.ctx, b = u.bbox, px = uPlot.pxRatio, rows = [[], [], []];
    ctx.save();
    ctx.beginPath();
    ctx.rect(b.left, b.top, b.width, b.height);
    ctx.clip();
    ctx.font = Math.round(11 * px) + "px sans-serif";
    // uPlot leaves the context as its last axis set it (right-aligned after a left axis).
    ctx.textAlign = "left";
    ctx.textBaseline = "middle";
    var ms = c.marks.map(function (m) { return { x: u.valToPos(xOf(m.run, m.t), "x", true), label: m.label }; })
      // A mark a few milliseconds before the first sample ("command started") is at the edge.
      .filter(function (m) { return m.x >= b.left - 3 * px && m.x <= b.left + b.width + 3 * px; })
      .map(function (m) { m.x = Math.min(Math.max(m.x, b.left + px), b.left + b.width - px); return m; })
      .sort(function (a, b2) { return a.x - b2.x; });
    ctx.strokeStyle = "#000";
    ctx.lineWidth = px;
    ctx.setLineDash([3 * px, 3 * px]);
    ms.forEach(function (m) {
      ctx.beginPath();
      ctx.moveTo(m.x, b.top);
      ctx.lineTo(m.x, b.top + b.height);
      ctx.stroke();
    });
    ctx.setLineDash([]);
    var placed = [];
    ms.forEach(function (m) {
      var w = ctx.measureText(m.label).width, gap = 3 * px;
      var x0 = m.x + gap;
      if (x0 + w > b.left + b.width) x0 = m.x - gap - w;
      for (var r = 0; r < rows.length; r++) {
        var free = rows[r].every(function (iv) { return x0 + w + gap < iv[0] || x0 > iv[1] + gap; });
        if (!free) continue;
        rows[r].push([x0, x0 + w]);
        var y = b.top + (r + 0.5) * 15 * px + 2 * px;
        placed.push({ label: m.label, row: r, left: x0 / px, right: (x0 + w) / px });
        ctx.fillStyle = "rgba(255,255,255,0.85)";
        ctx.fillRect(x0 - px, y - 7 * px, w + 2 * px, 14 * px);
        ctx.fillStyle = "#000";
        ctx.fillText(m.label, x0, y);
        break;
      }
    });
    ctx.restore();
    u.plumbLabels = placed;
  }

  function isolated(u, si) {
    var v = u.data[si], r = u.series[si].idxs || [0, v.length - 1], out = [];
    for (var i = r[0]; i <= r[1]; i++) {
      if (v[i] == null) continue;
      if ((i === 0 || v[i - 1] == null) && (i === v.length - 1 || v[i + 1] == null)) out.push(i);
    }
    return out;
  }

  // Ticks of an asinh axis: 0 and powers of 10 (of 8 for bytes: 512 KiB, 4 MiB, 32 MiB…),
  // thinned so that labels are at least 22 px apart.
  function logSplits(bytes) {
    return function (u, ai, lo, hi) {
      var base = bytes ? 8 : 10, c = lo <= 0 ? [0] : [];
      for (var e = -6; e <= 22; e++) {
        var v = Math.pow(base, e);
        if (v >= Math.max(lo, 1e-9) && v <= hi) c.push(v);
      }
      var h = (u.bbox && u.bbox.height ? u.bbox.height / uPlot.pxRatio : 260);
      var a = Math.asinh(Math.max(lo, 0)), b = Math.asinh(hi);
      var out = [], last = -1e9;
      c.forEach(function (v) {
        var y = (Math.asinh(v) - a) / ((b - a) || 1) * h;
        if (y - last >= 22) { out.push(v); last = y; }
      });
      return out;
    };
  }

  function yScale(log, base) {
    // "Log" axes are asinh: logarithmic for large values, linear through zero, so an idle
    // second (0 B/s) is drawn, not dropped.
    if (log) {
      return { distr: 4, log: base, asinh: 1,
        range: function (u, lo, hi) { return [Math.min(0, lo || 0), Math.max(1, (hi || 1) * 1.5)]; } };
    }
    return {
      range: function (u, lo, hi) {
        if (lo == null || hi == null) return [0, 1];
        var r = uPlot.rangeNum(Math.min(0, lo), hi, 0.1, true);
        return [Math.min(0, r[0]), r[1] > 0 ? r[1] : 1];
      }
    };
  }

  function ySize(u, values) {
    if (!values) return 50;
    var n = 0;
    values.forEach(function (v) { if (v) n = Math.max(n, String(v).length); });
    return Math.max(40, n * 7 + 18);
  }

  function build(c, box, range) {
    var raw = rawData(c);
    var hasRight = c.series.some(function (s) { return s.right; });
    var shown = c.series.map(function () { return true; });
    var bytesLeft = c.y_fmt === "bytes" || c.y_fmt === "byte_rate";
    var series = [{ value: function (u, x) { return x == null ? "" : timeText(x); } }];
    var bands = [], lastArea = -1;
    c.series.forEach(function (s, k) {
      var o = {
        label: s.name + (s.right && hasRight ? " (right)" : ""),
        stroke: s.color,
        width: s.area ? 1 : 1.6,
        scale: s.right ? "y2" : "y",
        spanGaps: !!s.span,
        // A value with no neighbour (a latency known only in the second that had I/O) is a
        // dot, or it would not show at all.
        points: { show: true, size: 5, fill: s.color, filter: s.span ? function () { return []; } : isolated }
      };
      if (s.dashed) o.dash = [6, 4];
      if (s.area) {
        o.fill = s.color + "bf";
        if (lastArea >= 0) bands.push({ series: [k + 1, lastArea + 1] });
        else o.fillTo = 0;
        lastArea = k;
      }
      series.push(o);
    });
    var axes = [
      { scale: "x", values: timeValues, size: WALL ? 52 : 36,
        label: WALL ? "time (" + (tzName === LOCAL ? LOCAL + ", " + localOffset() : tzName) + ")"
          : "time since each run's start",
        labelSize: 18, incrs: WALL ? undefined : REL_INCRS, space: 70 },
      { scale: "y", label: c.y_label, labelSize: 18, size: ySize,
        values: axisValues(c.y_fmt, c.y_log), incrs: bytesLeft && !c.y_log ? BYTE_INCRS : undefined,
        splits: c.y_log ? logSplits(bytesLeft) : undefined }
    ];
    if (hasRight) {
      var b2 = c.y2_fmt === "bytes" || c.y2_fmt === "byte_rate";
      axes.push({ scale: "y2", side: 1, grid: { show: false }, label: c.y2_label || "", labelSize: 18,
        size: ySize, values: axisValues(c.y2_fmt, false), incrs: b2 ? BYTE_INCRS : undefined });
    }
    var scales = { x: { time: WALL }, y: yScale(c.y_log, bytesLeft ? 2 : 10) };
    if (hasRight) scales.y2 = yScale(false);
    var u;
    var opts = {
      width: Math.max(320, box.clientWidth),
      height: 330,
      scales: scales,
      axes: axes,
      series: series,
      bands: bands,
      legend: { live: false },
      cursor: { sync: { key: "plumb", setSeries: false }, drag: { x: true, y: false }, points: { show: false } },
      tzDate: tzDate,
      plugins: [tipPlugin(c, raw)],
      hooks: {
        draw: [function (uu) { drawMarks(c, uu); }],
        setScale: [function (uu, key) {
          if (key !== "x" || syncing || !ready) return;
          syncing = true;
          var mn = uu.scales.x.min, mx = uu.scales.x.max;
          charts.forEach(function (o) { if (o !== uu) o.setScale("x", { min: mn, max: mx }); });
          syncing = false;
        }],
        setSeries: [function (uu, si) {
          if (si == null || si < 1) return;
          shown[si - 1] = uu.series[si].show;
          if (!c.series[si - 1].area) return;
          var mn = uu.scales.x.min, mx = uu.scales.x.max;
          uu.setData(stacked(c, raw, shown), false);
          uu.setScale("x", { min: mn, max: mx });
        }]
      }
    };
    u = new uPlot(opts, stacked(c, raw, shown), box);
    u.plumb = { id: c.id, raw: raw, chart: c };
    if (range) u.setScale("x", range);
    return u;
  }

  function buildAll() {
    var t0 = performance.now();
    var range = null;
    if (charts.length) range = { min: charts[0].scales.x.min, max: charts[0].scales.x.max };
    ready = false;
    charts.forEach(function (u) { u.destroy(); });
    charts = [];
    D.charts.forEach(function (c) {
      var box = document.querySelector("#" + CSS.escape(c.id) + " .pc-plot");
      if (!box) return;
      var ns = box.querySelector("noscript");
      if (ns) ns.remove();
      charts.push(build(c, box, range));
    });
    ready = true;
    window.plumbCharts = charts;
    window.plumbBuildMs = performance.now() - t0;
    window.plumbReady = true;
  }

  var sel = document.getElementById("pc-tz");
  if (sel) {
    var zones = [LOCAL];
    if (LOCAL !== "UTC" && LOCAL !== "Etc/UTC") zones.push("UTC");
    zones.forEach(function (z) {
      var o = document.createElement("option");
      o.value = z;
      o.textContent = z === LOCAL ? "this computer's zone (" + z + ", " + localOffset() + ")" : "UTC";
      sel.appendChild(o);
    });
    if (!WALL) sel.disabled = true;
    sel.addEventListener("change", function () { tzName = sel.value; buildAll(); });
  }
  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      charts.forEach(function (u) {
        var w = Math.max(320, u.root.parentNode.clientWidth);
        if (w !== u.width) u.setSize({ width: w, height: u.height });
      });
    }, 150);
  });
  buildAll();
})();
