// sluice console: the live chart of the pipelines page (the only script of the console).
// Copyright the sluice authors. Licensed under the Apache License, Version 2.0 (see
// /assets/LICENSE-chart.txt). No dependency; served by the console itself.
//
// Every <canvas class="chart" data-pipeline="NAME"> gets two lines: rows/s (blue, left
// scale) and dead letters per minute (red, right scale), refreshed from /api/rates every
// 5 s. Names and numbers are drawn on the canvas, never inserted as HTML.
(function () {
  "use strict";
  var canvases = document.querySelectorAll("canvas.chart[data-pipeline]");
  if (canvases.length === 0) { return; }

  function maxOf(points) {
    var m = 0;
    for (var i = 0; i < points.length; i++) { if (points[i].v > m) { m = points[i].v; } }
    return m > 0 ? m : 1;
  }

  function line(ctx, points, t0, t1, max, box, color) {
    if (points.length === 0) { return; }
    ctx.strokeStyle = color;
    ctx.lineWidth = 2;
    ctx.beginPath();
    for (var i = 0; i < points.length; i++) {
      var x = box.x + (points[i].t - t0) / Math.max(1, t1 - t0) * box.w;
      var y = box.y + box.h - points[i].v / max * box.h;
      if (i === 0) { ctx.moveTo(x, y); } else { ctx.lineTo(x, y); }
    }
    ctx.stroke();
  }

  function draw(canvas, series) {
    var ctx = canvas.getContext("2d");
    var w = canvas.width, h = canvas.height;
    var box = { x: 50, y: 10, w: w - 100, h: h - 40 };
    ctx.clearRect(0, 0, w, h);
    ctx.font = "11px sans-serif";
    ctx.strokeStyle = "#dde";
    ctx.strokeRect(box.x, box.y, box.w, box.h);
    var rows = series ? series.rows_per_s : [];
    var dead = series ? series.dead_per_min : [];
    var all = rows.concat(dead);
    var now = Math.floor(Date.now() / 1000);
    var t0 = now - 600, t1 = now;
    for (var i = 0; i < all.length; i++) { if (all[i].t < t0) { t0 = all[i].t; } }
    var maxRows = maxOf(rows), maxDead = maxOf(dead);
    line(ctx, rows, t0, t1, maxRows, box, "#2458b3");
    line(ctx, dead, t0, t1, maxDead, box, "#c0392b");
    ctx.fillStyle = "#2458b3";
    ctx.fillText(maxRows.toFixed(1) + " rows/s", 2, box.y + 10);
    ctx.fillStyle = "#c0392b";
    ctx.fillText(maxDead.toFixed(0) + " dl/min", box.x + box.w + 4, box.y + 10);
    ctx.fillStyle = "#667";
    var last = rows.length ? rows[rows.length - 1].v.toFixed(1) : "-";
    ctx.fillText("now: " + last + " rows/s · last " + Math.round((t1 - t0) / 60) + " min",
      box.x, h - 8);
  }

  function refresh() {
    fetch("/api/rates", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : []; })
      .then(function (all) {
        canvases.forEach(function (canvas) {
          var name = canvas.getAttribute("data-pipeline");
          var found = null;
          for (var i = 0; i < all.length; i++) { if (all[i].name === name) { found = all[i]; } }
          draw(canvas, found);
        });
      })
      .catch(function () { /* the next refresh tries again */ });
  }

  refresh();
  setInterval(refresh, 5000);
})();
