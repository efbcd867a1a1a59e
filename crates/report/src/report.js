// nflab report: hover values, legend toggles, zoom on time axes, and a
// self-check the browser test reads. Plain JS, no libraries, works offline.
(function () {
  "use strict";
  var errors = [];
  window.addEventListener("error", function (e) { errors.push(String(e.message || e)); });
  var NS = "http://www.w3.org/2000/svg";

  function axis(s) {
    if (!s) return null;
    var p = s.split(",");
    return { log: p[0] === "log", a: +p[1], b: +p[2], p0: +p[3], p1: +p[4], fmt: p[5], a0: +p[1], b0: +p[2] };
  }
  function frac(ax, v) {
    if (ax.log) {
      var l = Math.log10(Math.max(v, 1e-300));
      return (l - Math.log10(ax.a)) / (Math.log10(ax.b) - Math.log10(ax.a));
    }
    return (v - ax.a) / (ax.b - ax.a);
  }
  function toPx(ax, v) { return ax.p0 + frac(ax, v) * (ax.p1 - ax.p0); }
  function fromPx(ax, p) {
    var f = (p - ax.p0) / (ax.p1 - ax.p0);
    if (ax.log) return Math.pow(10, Math.log10(ax.a) + f * (Math.log10(ax.b) - Math.log10(ax.a)));
    return ax.a + f * (ax.b - ax.a);
  }
  function trim(s) { return s.indexOf(".") >= 0 ? s.replace(/0+$/, "").replace(/\.$/, "") : s; }
  function fmt(v, kind) {
    if (!isFinite(v)) return "—";
    var a = Math.abs(v);
    switch (kind) {
      case "ns":
        if (a < 1e3) return trim(v.toFixed(1)) + " ns";
        if (a < 1e6) return trim((v / 1e3).toFixed(2)) + " µs";
        if (a < 1e9) return trim((v / 1e6).toFixed(3)) + " ms";
        return trim((v / 1e9).toFixed(3)) + " s";
      case "s": return trim(v.toFixed(a < 0.01 ? 6 : 4)) + " s";
      case "pps":
        if (a >= 1e6) return trim((v / 1e6).toFixed(3)) + " Mpps";
        if (a >= 1e3) return trim((v / 1e3).toFixed(2)) + " kpps";
        return v.toFixed(0) + " pps";
      case "pct": return trim((v * 100).toPrecision(3)) + "%";
      case "nines":
        var p = (1 - 1 / Math.max(v, 1)) * 100;
        return trim(p.toFixed(Math.max(0, Math.round(Math.log10(v)) - 1))) + "%";
      default:
        if (a >= 1e6) return trim((v / 1e6).toFixed(3)) + "M";
        if (a >= 1e4) return trim((v / 1e3).toFixed(2)) + "k";
        return trim(v.toPrecision(4));
    }
  }
  function parseV(el) {
    var s = el.getAttribute("data-v");
    if (!s) return [];
    return s.split(";").map(function (t) { return t.split(",").map(Number); });
  }

  var tip = document.getElementById("tip");
  function showTip(x, y, text) {
    tip.textContent = text;
    tip.hidden = false;
    tip.style.left = Math.min(x + 14, window.innerWidth - tip.offsetWidth - 8) + "px";
    tip.style.top = (y + 14) + "px";
  }
  function hideTip() { tip.hidden = true; }

  function setup(svg) {
    var ax = axis(svg.getAttribute("data-ax")), ay = axis(svg.getAttribute("data-ay"));
    var ay2 = axis(svg.getAttribute("data-ay2"));
    if (!ax || !ay) return;
    var marks = Array.prototype.slice.call(svg.querySelectorAll(".mk"));
    marks.forEach(function (m) { m._v = parseV(m); });
    svg._ax = ax;

    // Legend: click toggles every element of the series.
    Array.prototype.forEach.call(svg.querySelectorAll(".lg"), function (lg) {
      lg.addEventListener("click", function () {
        var s = lg.getAttribute("data-s");
        var off = !lg.classList.contains("off");
        lg.classList.toggle("off", off);
        Array.prototype.forEach.call(svg.querySelectorAll('[data-s="' + s + '"]'), function (el) {
          if (!el.classList.contains("lg")) el.classList.toggle("off", off);
        });
      });
    });

    function local(ev) {
      var pt = svg.createSVGPoint();
      pt.x = ev.clientX; pt.y = ev.clientY;
      var m = svg.getScreenCTM();
      return m ? pt.matrixTransform(m.inverse()) : pt;
    }
    var hl = document.createElementNS(NS, "circle");
    hl.setAttribute("r", "4"); hl.setAttribute("fill", "none"); hl.setAttribute("stroke", "#000");
    hl.setAttribute("stroke-width", "1.5"); hl.style.display = "none"; hl.style.pointerEvents = "none";
    svg.appendChild(hl);

    // Hover: the nearest data point of a visible series within 25 px.
    svg.addEventListener("mousemove", function (ev) {
      if (svg._drag) return;
      var p = local(ev), best = null, bd = 625;
      marks.forEach(function (m) {
        if (m.classList.contains("off") || !m._v.length) return;
        var yax = m.getAttribute("data-y2") ? ay2 : ay;
        var kind = m.getAttribute("data-k");
        m._v.forEach(function (v) {
          var px, py, d;
          if (kind === "cols") {
            var x0 = toPx(ax, v[0]), x1 = toPx(ax, v[1]);
            if (p.x < x0 - 1 || p.x > x1 + 1) return;
            var ylo = toPx(yax, v[2]), yhi = toPx(yax, v[3]);
            py = Math.max(Math.min(p.y, ylo), yhi); px = (x0 + x1) / 2;
            d = (p.y - py) * (p.y - py) * 0.2;
            if (d < bd) { bd = d; best = { m: m, px: px, py: py, text: fmt(v[0], ax.fmt) + " – " + fmt(v[1], ax.fmt) + "\nmin " + fmt(v[2], yax.fmt) + ", max " + fmt(v[3], yax.fmt) }; }
            return;
          }
          px = toPx(ax, v[0]); py = toPx(yax, v[1]);
          d = (px - p.x) * (px - p.x) + (py - p.y) * (py - p.y);
          if (d < bd) { bd = d; best = { m: m, px: px, py: py, text: fmt(v[0], ax.fmt) + ", " + fmt(v[1], yax.fmt) }; }
        });
      });
      if (best) {
        hl.setAttribute("cx", best.px); hl.setAttribute("cy", best.py); hl.style.display = "";
        showTip(ev.clientX, ev.clientY, best.m.getAttribute("data-n") + "\n" + best.text);
      } else { hl.style.display = "none"; hideTip(); }
    });
    svg.addEventListener("mouseleave", function () { hl.style.display = "none"; hideTip(); });

    if (svg.getAttribute("data-zoom") === "x") setupZoom(svg, ax, ay, marks, local);
  }

  // Redraw marks and x ticks for the current x domain of ax.
  function redraw(svg, ax, ay, marks) {
    marks.forEach(function (m) {
      var k = m.getAttribute("data-k"), v = m._v, out = [];
      if (k === "line") {
        v.forEach(function (q) { out.push(toPx(ax, q[0]).toFixed(1) + "," + toPx(ay, q[1]).toFixed(1)); });
        m.setAttribute("points", out.join(" "));
      } else if (k === "dots") {
        v.forEach(function (q) { out.push("M" + toPx(ax, q[0]).toFixed(1) + " " + toPx(ay, q[1]).toFixed(1) + "h0"); });
        m.setAttribute("d", out.join(""));
      } else if (k === "cols") {
        v.forEach(function (q) {
          var x0 = toPx(ax, q[0]), x1 = toPx(ax, q[1]);
          if (x1 < ax.p0 - 2 || x0 > ax.p1 + 2) return;
          var y0 = toPx(ay, q[2]), y1 = toPx(ay, q[3]);
          if (Math.abs(y0 - y1) < 1) y1 = y0 - 1;
          out.push("M" + ((x0 + x1) / 2).toFixed(1) + " " + y0.toFixed(1) + "V" + y1.toFixed(1));
        });
        m.setAttribute("d", out.join(""));
      }
    });
    Array.prototype.forEach.call(svg.querySelectorAll("rect[data-x0]"), function (r) {
      var a = toPx(ax, +r.getAttribute("data-x0")), b = toPx(ax, +r.getAttribute("data-x1"));
      var mw = +r.getAttribute("data-mw") || 0, w = Math.max(b - a, mw);
      r.setAttribute("x", (a - (b - a < mw ? (mw - (b - a)) / 2 : 0)).toFixed(1));
      r.setAttribute("width", w.toFixed(1));
    });
    var g = svg.querySelector("g.xt");
    if (!g) return;
    while (g.firstChild) g.removeChild(g.firstChild);
    var span = ax.b - ax.a, raw = span / 6, p10 = Math.pow(10, Math.floor(Math.log10(raw))), step = p10;
    [1, 2, 2.5, 5, 10].some(function (m) { step = m * p10; return step >= raw * 0.999; });
    var top = ay.p1, bottom = ay.p0;
    for (var t = Math.ceil(ax.a / step) * step; t <= ax.b + step * 1e-9; t += step) {
      var x = toPx(ax, t);
      var ln = document.createElementNS(NS, "line");
      ln.setAttribute("x1", x); ln.setAttribute("x2", x); ln.setAttribute("y1", top); ln.setAttribute("y2", bottom);
      ln.setAttribute("stroke", "#e6e6e6"); g.appendChild(ln);
      var tx = document.createElementNS(NS, "text");
      tx.setAttribute("x", x); tx.setAttribute("y", bottom + 14); tx.setAttribute("text-anchor", "middle");
      tx.textContent = fmt(Math.abs(t) < step * 1e-9 ? 0 : t, ax.fmt); g.appendChild(tx);
    }
  }

  function setupZoom(svg, ax, ay, marks, local) {
    var sel = document.createElementNS(NS, "rect");
    sel.setAttribute("fill", "rgba(11,87,208,.15)"); sel.setAttribute("stroke", "#0b57d0");
    sel.setAttribute("y", ay.p1); sel.setAttribute("height", ay.p0 - ay.p1); sel.style.display = "none";
    sel.style.pointerEvents = "none";
    svg.appendChild(sel);
    var start = null;
    svg.addEventListener("mousedown", function (ev) {
      var p = local(ev);
      if (p.x < ax.p0 || p.x > ax.p1) return;
      start = p.x; svg._drag = true; ev.preventDefault();
    });
    svg.addEventListener("mousemove", function (ev) {
      if (start === null) return;
      var x = Math.max(ax.p0, Math.min(ax.p1, local(ev).x));
      sel.setAttribute("x", Math.min(start, x)); sel.setAttribute("width", Math.abs(x - start));
      sel.style.display = "";
    });
    window.addEventListener("mouseup", function (ev) {
      if (start === null) return;
      var x = Math.max(ax.p0, Math.min(ax.p1, local(ev).x));
      var a = Math.min(start, x), b = Math.max(start, x);
      start = null; svg._drag = false; sel.style.display = "none";
      if (b - a < 4) return;
      var na = fromPx(ax, a), nb = fromPx(ax, b);
      ax.a = na; ax.b = nb;
      redraw(svg, ax, ay, marks);
    });
    svg.addEventListener("dblclick", function () {
      ax.a = ax.a0; ax.b = ax.b0;
      redraw(svg, ax, ay, marks);
    });
    svg._zoom = function (a, b) { ax.a = a; ax.b = b; redraw(svg, ax, ay, marks); };
  }

  function check() {
    var figs = document.querySelectorAll("section.fig"), empty = [], ok = 0;
    Array.prototype.forEach.call(figs, function (f) {
      var svg = f.querySelector("svg"), n = 0;
      if (svg) {
        var r = svg.getBoundingClientRect();
        Array.prototype.forEach.call(svg.querySelectorAll(".mk,rect[data-x0]"), function (m) {
          var pts = (m.getAttribute("data-v") || "").length, bb = m.getBBox ? m.getBBox() : { width: 0, height: 0 };
          if ((pts > 0 || m.tagName === "rect") && (bb.width > 0 || bb.height > 0)) n++;
        });
        if (r.width > 0 && r.height > 0 && n > 0) { ok++; return; }
      }
      empty.push(f.getAttribute("data-fig"));
    });
    var result = { figures: figs.length, rendered: ok, empty: empty, errors: errors };
    if (location.hash === "#selftest") result.interaction = selftest();
    document.body.setAttribute("data-nflab-check", JSON.stringify(result));
  }

  // Exercise the interaction the way a reader would (used by the browser test).
  function selftest() {
    var out = { hover: 0, toggle: 0, zoom: 0, failures: [] };
    Array.prototype.forEach.call(document.querySelectorAll("svg.plot"), function (svg, i) {
      try {
        var m = svg.querySelector(".mk[data-k=line],.mk[data-k=dots],.mk[data-k=cols]");
        if (!m || !m._v || !m._v.length) return;
        var ax = axis(svg.getAttribute("data-ax")), ay = axis(svg.getAttribute("data-ay"));
        var v = m._v[Math.floor(m._v.length / 2)];
        var yv = m.getAttribute("data-k") === "cols" ? v[3] : v[1];
        var xv = m.getAttribute("data-k") === "cols" ? (v[0] + v[1]) / 2 : v[0];
        var ctm = svg.getScreenCTM(), pt = svg.createSVGPoint();
        pt.x = toPx(ax, xv); pt.y = toPx(m.getAttribute("data-y2") ? axis(svg.getAttribute("data-ay2")) : ay, yv);
        var sp = pt.matrixTransform(ctm);
        svg.dispatchEvent(new MouseEvent("mousemove", { clientX: sp.x, clientY: sp.y, bubbles: true }));
        if (!tip.hidden && tip.textContent.length > 0) out.hover++; else out.failures.push("hover " + i);
        hideTip();
        var lg = svg.querySelector(".lg");
        if (lg) {
          lg.dispatchEvent(new MouseEvent("click", { bubbles: true }));
          var s = lg.getAttribute("data-s"), hidden = svg.querySelector('.mk[data-s="' + s + '"].off');
          lg.dispatchEvent(new MouseEvent("click", { bubbles: true }));
          var shown = !svg.querySelector('.mk[data-s="' + s + '"].off');
          if (hidden && shown) out.toggle++; else out.failures.push("toggle " + i);
        }
        if (svg._zoom) {
          var a = svg._ax.a0, b = svg._ax.b0, before = m.getAttribute("d") || m.getAttribute("points");
          svg._zoom(a, a + (b - a) / 4);
          var after = m.getAttribute("d") || m.getAttribute("points");
          var ticks = svg.querySelectorAll("g.xt text").length;
          svg.dispatchEvent(new MouseEvent("dblclick", { bubbles: true }));
          if (after && after !== before && ticks > 1 && svg._ax.a === a) out.zoom++; else out.failures.push("zoom " + i);
        }
      } catch (e) { out.failures.push("selftest " + i + ": " + e); }
    });
    return out;
  }

  try {
    Array.prototype.forEach.call(document.querySelectorAll("svg.plot"), setup);
  } catch (e) { errors.push("setup: " + e); }
  check();
})();
