// The ratelimitd dashboard. Plain JavaScript, no build step. Every piece of
// data is put on the page with textContent, never parsed as HTML, so an id
// like <img src=x onerror=alert(1)> shows as those characters.
//
// The page polls: the traffic series once a second (only the seconds it has
// not seen, ?since=), the other panels every two seconds. Polling, not a
// server-sent event stream: each poll is a short request that the admin
// listener's timeouts, connection cap and graceful shutdown treat like any
// other, and a page that loses its server catches up on the next poll.
(function () {
  "use strict";

  var SERIES_SECONDS = 900;
  var status = document.getElementById("status");

  // el makes an element holding text (as text).
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function fmt(n) {
    if (typeof n !== "number") return String(n);
    if (Number.isInteger(n)) return n.toLocaleString("en-US");
    return n.toLocaleString("en-US", { maximumFractionDigits: 2 });
  }

  // dur shows a time in milliseconds, in µs below 1 ms.
  function dur(ms) {
    return ms > 0 && ms < 1 ? fmt(ms * 1000) + " µs" : fmt(ms) + " ms";
  }

  function bytes(n) {
    var units = ["B", "KiB", "MiB", "GiB", "TiB"];
    var i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
  }

  // NotAvailable marks a panel whose data source the server does not have.
  function NotAvailable() {}

  // getJSON fetches a JSON endpoint with the session cookie. A 401 means the
  // session ended: reloading shows the login form.
  function getJSON(url, init) {
    init = init || {};
    init.credentials = "same-origin";
    init.cache = "no-store";
    return fetch(url, init).then(function (r) {
      if (r.status === 401) {
        window.location.reload();
        throw new Error("session ended");
      }
      if (r.status === 404) throw new NotAvailable();
      return r.json().then(function (body) {
        if (!r.ok) {
          var e = new Error(body && body.error ? body.error : "HTTP " + r.status);
          e.field = body && body.field;
          throw e;
        }
        return body;
      });
    });
  }

  function panelState(id, ok) {
    var p = document.getElementById(id);
    var u = p.querySelector(".unavailable");
    if (u) u.hidden = ok;
  }

  function okStatus() {
    status.textContent = "updated " + new Date().toLocaleTimeString();
    status.className = "";
  }

  function failStatus(err) {
    if (err instanceof NotAvailable) return;
    status.textContent = "cannot reach the server: " + err.message;
    status.className = "bad";
  }

  function chartWidth(node) {
    return Math.max(320, node.clientWidth || 640);
  }

  // Live traffic.
  var traffic = { t: [], allowed: [], denied: [], shadow: [], errors: [], last: 0, plot: null };
  var trafficNode = document.getElementById("traffic-chart");

  function trafficPlot() {
    var opts = {
      width: chartWidth(trafficNode),
      height: 260,
      series: [
        {},
        { label: "allowed", stroke: "#2e7d32", width: 1.5 },
        { label: "denied", stroke: "#c62828", width: 1.5 },
        { label: "shadow-denied", stroke: "#ef6c00", width: 1.5, dash: [6, 3] },
        { label: "errors", stroke: "#616161", width: 1.5 }
      ],
      axes: [{}, { label: "checks/s" }],
      scales: { y: { range: function (u, lo, hi) { return [0, Math.max(1, hi * 1.1)]; } } }
    };
    return new uPlot(opts, [traffic.t, traffic.allowed, traffic.denied, traffic.shadow, traffic.errors], trafficNode);
  }

  function pollTraffic() {
    var url = "/dashboard/traffic" + (traffic.last ? "?since=" + traffic.last : "");
    return getJSON(url).then(function (d) {
      panelState("traffic-panel", true);
      for (var i = 0; i < d.t.length; i++) {
        traffic.t.push(d.t[i]);
        traffic.allowed.push(d.allowed[i]);
        traffic.denied.push(d.denied[i]);
        traffic.shadow.push(d.shadow_denied[i]);
        traffic.errors.push(d.errors[i]);
      }
      if (d.t.length) traffic.last = d.t[d.t.length - 1];
      var drop = 0;
      while (drop < traffic.t.length && traffic.t[drop] < d.now - SERIES_SECONDS) drop++;
      ["t", "allowed", "denied", "shadow", "errors"].forEach(function (k) { traffic[k].splice(0, drop); });
      var n = traffic.t.length - 1;
      document.getElementById("traffic-now").textContent = n < 0 ? "–" :
        "allowed " + fmt(traffic.allowed[n]) + ", denied " + fmt(traffic.denied[n]) +
        ", shadow-denied " + fmt(traffic.shadow[n]) + ", errors " + fmt(traffic.errors[n]);
      if (!traffic.plot) traffic.plot = trafficPlot();
      else traffic.plot.setData([traffic.t, traffic.allowed, traffic.denied, traffic.shadow, traffic.errors]);
      okStatus();
    }).catch(function (err) {
      if (err instanceof NotAvailable) panelState("traffic-panel", false);
      failStatus(err);
    });
  }

  // Top keys.
  var topWindow = document.getElementById("top-window");

  function renderTop(tableId, noteId, d) {
    var body = document.querySelector("#" + tableId + " tbody");
    clear(body);
    d.keys.forEach(function (k) {
      var tr = el("tr");
      var id = el("td", k.truncated ? k.id + "…" : k.id, "id");
      if (k.truncated) id.title = "id cut to its first bytes";
      tr.appendChild(id);
      tr.appendChild(el("td", k.label));
      tr.appendChild(el("td", fmt(k.count), "num"));
      body.appendChild(tr);
    });
    if (!d.keys.length) {
      var tr = el("tr");
      var td = el("td", "none", "empty");
      td.colSpan = 3;
      tr.appendChild(td);
      body.appendChild(tr);
    }
    var note = "of " + fmt(d.total) + " in all; each count is at most " + fmt(d.bound) + " above the truth";
    if (d.sampled) {
      note = "of about " + fmt(d.total) + " in all: under load, admitted hits are sampled 1 in " + fmt(d.sample) +
        ", so counts are estimates (at most " + fmt(d.bound) + " above the sampled weight)";
    }
    document.getElementById(noteId).textContent = note;
  }

  function pollTop() {
    var w = encodeURIComponent(topWindow.value);
    return Promise.all([
      getJSON("/top?by=hits&window=" + w + "&n=20"),
      getJSON("/top?by=denials&window=" + w + "&n=20")
    ]).then(function (r) {
      panelState("top-panel", true);
      renderTop("top-hits", "top-hits-note", r[0]);
      renderTop("top-denials", "top-denials-note", r[1]);
    }).catch(function (err) {
      if (err instanceof NotAvailable) panelState("top-panel", false);
      failStatus(err);
    });
  }
  topWindow.addEventListener("change", pollTop);

  // Rules.
  function pollRules() {
    return getJSON("/dashboard/rules").then(function (d) {
      panelState("rules-panel", true);
      var body = document.querySelector("#rules tbody");
      clear(body);
      var over = 0;
      d.rules.forEach(function (r) {
        var tr = el("tr", null, r.shadow ? "shadow" : "");
        tr.appendChild(el("td", r.name + (r.shadow ? " (shadow)" : "")));
        tr.appendChild(el("td", r.policy));
        tr.appendChild(el("td", fmt(r.checks_per_sec), "num"));
        tr.appendChild(el("td", fmt(r.denied_per_sec), "num"));
        tr.appendChild(el("td", r.shadow ? fmt(r.shadow_denied_per_sec) : "–", "num"));
        body.appendChild(tr);
        over = r.over_ms;
      });
      document.getElementById("rules-note").textContent = d.rules.length ?
        "rates over the last " + fmt(over / 1000) + " s" : "no rules configured";
    }).catch(function (err) {
      if (err instanceof NotAvailable) panelState("rules-panel", false);
      failStatus(err);
    });
  }

  // Health.
  function pollHealth() {
    return getJSON("/dashboard/health").then(function (h) {
      panelState("health-panel", true);
      var dl = document.getElementById("health");
      clear(dl);
      function row(k, v) { dl.appendChild(el("dt", k)); dl.appendChild(el("dd", v)); }
      row("live buckets", fmt(h.buckets) + " of " + fmt(h.max_buckets) + " (" + fmt(h.buckets_pct) + " %)");
      row("full-table denials", fmt(h.full_denials));
      row("evictions", fmt(h.evictions));
      row("shards", fmt(h.shards) + ", " + fmt(h.restarts) + " restarts");
      row("sweep rounds", fmt(h.sweep_rounds) + ", the last took " + dur(h.sweep_last_ms));
      row("check latency", "p50 " + dur(h.check_p50_ms) + ", p99 " + dur(h.check_p99_ms));
      if (h.journal) {
        var j = h.journal;
        row("journal", "sync " + j.sync_mode + ", " + bytes(j.bytes));
        row("last snapshot", j.last_snapshot_ms ? new Date(j.last_snapshot_ms).toLocaleString() : "none yet");
        row("snapshots", fmt(j.snapshots) + ", " + fmt(j.snapshot_errors) + " failed");
        row("journal errors", fmt(j.errors));
        row("torn tails", fmt(j.torn_tails));
      } else {
        row("journal", "none (in memory)");
      }
      if (h.cluster) {
        row("cluster", h.cluster.self + ", " + fmt(h.cluster.vshards) + " vshards");
        h.cluster.members.forEach(function (m) {
          row("member " + m.id, m.address + ", " + (m.alive ? "alive" : "down") + ", " + fmt(m.vshards) + " vshards");
        });
      }
    }).catch(function (err) {
      if (err instanceof NotAvailable) panelState("health-panel", false);
      failStatus(err);
    });
  }

  // The playground.
  var form = document.getElementById("sim-form");
  var simShow = document.getElementById("sim-show");
  var simError = document.getElementById("sim-error");
  var simNode = document.getElementById("sim-chart");
  var sim = { result: null, plot: null };
  var needsDuration = { steady: true, ramp: true, poisson: true };
  var colors = { fixed_window: "#1565c0", sliding_window: "#6a1b9a", token_bucket: "#2e7d32", leaky_bucket: "#ef6c00" };

  function showShapeFields() {
    var shape = form.elements.shape.value;
    form.querySelectorAll("label[data-shapes]").forEach(function (l) {
      l.hidden = l.getAttribute("data-shapes").split(" ").indexOf(shape) < 0;
    });
    var d = form.elements.duration;
    d.placeholder = needsDuration[shape] ? "required" : "2 × scale";
    if (needsDuration[shape] && !d.value) d.value = "10s";
  }
  form.elements.shape.addEventListener("change", showShapeFields);
  showShapeFields();

  // A duration field: digits are milliseconds, anything else a Go duration.
  function durationValue(s) { return /^\d+$/.test(s) ? Number(s) : s; }
  var kinds = {
    limit: Number, burst: Number, rate: Number, from_rate: Number, to_rate: Number, hits: Number,
    before: Number, after: Number, seed: Number,
    scale: durationValue, at: durationValue, every: durationValue, offset: durationValue, duration: durationValue
  };

  function simRequest() {
    var f = form.elements;
    var req = { policy: { algorithm: f.algorithm.value }, traffic: { shape: f.shape.value } };
    ["limit", "scale", "burst"].forEach(function (k) {
      if (f[k].value !== "") req.policy[k] = kinds[k](f[k].value.trim());
    });
    form.querySelectorAll("label[data-shapes] input").forEach(function (input) {
      if (!input.closest("label").hidden && input.value.trim() !== "") {
        req.traffic[input.name] = kinds[input.name](input.value.trim());
      }
    });
    if (f.bucket.value.trim() !== "") req.bucket = durationValue(f.bucket.value.trim());
    return req;
  }

  function drawSim() {
    var d = sim.result;
    if (!d) return;
    var key = simShow.value === "denied" ? "denied_per_bucket" : "admitted_per_bucket";
    var xs = d.offered.map(function (_, i) { return i * d.bucket_ms / 1000; });
    var data = [xs];
    var series = [{ label: "s" }];
    d.algorithms.forEach(function (a) {
      data.push(a[key]);
      series.push({
        label: a.algorithm + (a.algorithm === d.selected ? " (chosen)" : ""),
        stroke: colors[a.algorithm],
        width: a.algorithm === d.selected ? 2.5 : 1.5,
        paths: uPlot.paths.stepped({ align: 1 })
      });
    });
    if (sim.plot) sim.plot.destroy();
    sim.plot = new uPlot({
      width: chartWidth(simNode),
      height: 280,
      scales: { x: { time: false } },
      series: series,
      axes: [{ label: "virtual seconds" }, { label: simShow.value + " per " + d.bucket_ms + " ms" }]
    }, data, simNode);
    var body = document.querySelector("#sim-totals tbody");
    clear(body);
    d.algorithms.forEach(function (a) {
      var tr = el("tr", null, a.algorithm === d.selected ? "chosen" : "");
      tr.appendChild(el("td", a.algorithm));
      tr.appendChild(el("td", a.policy));
      tr.appendChild(el("td", fmt(a.admitted), "num"));
      tr.appendChild(el("td", fmt(a.denied), "num"));
      body.appendChild(tr);
    });
  }
  simShow.addEventListener("change", drawSim);

  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    simError.hidden = true;
    getJSON("/simulate", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(simRequest())
    }).then(function (d) {
      sim.result = d;
      drawSim();
    }).catch(function (err) {
      simError.textContent = err instanceof NotAvailable ? "not available on this server" : err.message;
      simError.hidden = false;
    });
  });

  window.addEventListener("resize", function () {
    if (traffic.plot) traffic.plot.setSize({ width: chartWidth(trafficNode), height: 260 });
    if (sim.plot) sim.plot.setSize({ width: chartWidth(simNode), height: 280 });
  });

  // Each poll is sent only once the previous one has answered, so a slow
  // server never piles requests up.
  function every(ms, fn) {
    function tick() { fn().then(function () { setTimeout(tick, ms); }); }
    tick();
  }
  every(1000, pollTraffic);
  every(2000, pollTop);
  every(2000, pollRules);
  every(2000, pollHealth);
})();
