/* cairn dashboard: confirmation dialogs, "select all", and live updates over server-sent
   events. Progressive enhancement only: every page works without this file. Values from
   runs are set with textContent, never parsed as HTML. */
(function () {
  "use strict";

  var root = document.body.getAttribute("data-root") || "";

  /* Confirm before an unsafe action; the server asks again when this script is absent. */
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var source = event.submitter && event.submitter.hasAttribute("data-confirm")
      ? event.submitter : form;
    var question = source.getAttribute("data-confirm");
    if (!question) return;
    if (question.indexOf("{n}") >= 0) {
      var n = form.querySelectorAll('input[name="run"]:checked').length;
      if (n === 0) {
        event.preventDefault();
        window.alert("Select at least one run first.");
        return;
      }
      question = question.replace("{n}", String(n));
    }
    if (!window.confirm(question)) {
      event.preventDefault();
      return;
    }
    if (!form.querySelector('input[name="confirmed"]')) {
      var flag = document.createElement("input");
      flag.type = "hidden";
      flag.name = "confirmed";
      flag.value = "yes";
      form.appendChild(flag);
    }
  });

  Array.prototype.forEach.call(document.querySelectorAll("[data-select-all]"), function (box) {
    box.addEventListener("change", function () {
      var boxes = box.form ? box.form.querySelectorAll('input[name="run"]') : [];
      Array.prototype.forEach.call(boxes, function (b) { b.checked = box.checked; });
    });
  });

  function watch(ids, detail, onRun) {
    if (!window.EventSource || ids.length === 0) return;
    var query = ids.map(function (id) { return "run=" + encodeURIComponent(id); }).join("&");
    var source = new EventSource(root + "/ui/events?" + query + (detail ? "&detail=1" : ""));
    source.addEventListener("run", function (e) { onRun(JSON.parse(e.data)); });
    source.addEventListener("end", function () { source.close(); });
  }

  function setText(scope, field, text) {
    var el = scope.querySelector('[data-field="' + field + '"]');
    if (el) el.textContent = text || "";
    return el;
  }

  function setStatus(scope, status) {
    Array.prototype.forEach.call(scope.querySelectorAll('[data-field="status"]'), function (el) {
      el.textContent = status;
      el.className = "status st-" + status.toLowerCase();
    });
  }

  function setProgress(scope, run) {
    var box = scope.querySelector('[data-field="progress"]');
    if (!box) return;
    var bar = box.querySelector("progress");
    if (run.percent === null || run.percent === undefined) {
      if (bar) bar.remove();
    } else {
      if (!bar) {
        bar = document.createElement("progress");
        bar.max = 100;
        box.insertBefore(bar, box.firstChild);
      }
      bar.value = run.percent;
      bar.textContent = run.percent + "%";
    }
    var text = box.querySelector(".progress-text");
    if (text) text.textContent = run.progress || "";
  }

  /* A row's start: a <time> as the page renders it, or "not started". */
  function setStarted(scope, run) {
    var cell = scope.querySelector('[data-field="started"]');
    if (!cell) return;
    cell.className = run.started ? "" : "muted";
    if (!run.started) {
      cell.textContent = "not started";
      return;
    }
    var moment = cell.querySelector("time");
    if (!moment) {
      moment = document.createElement("time");
      cell.textContent = "";
      cell.appendChild(moment);
    }
    moment.setAttribute("datetime", run.started_at);
    /* "2025-06-01 12:00:00" as the page renders it: date and time, each kept whole. */
    moment.textContent = "";
    run.started.split(" ").forEach(function (part, i) {
      if (i) moment.appendChild(document.createTextNode(" "));
      var span = document.createElement("span");
      span.textContent = part;
      moment.appendChild(span);
    });
  }

  /* The runs page: rows of unfinished runs follow their runs. */
  var table = document.querySelector("[data-live-runs]");
  if (table) {
    var rows = {};
    Array.prototype.forEach.call(table.querySelectorAll("tr[data-live]"), function (tr) {
      rows[tr.getAttribute("data-run-id")] = tr;
    });
    watch(Object.keys(rows), false, function (run) {
      var tr = rows[run.run_id];
      if (!tr) return;
      setStatus(tr, run.status);
      setProgress(tr, run);
      var waiting = setText(tr, "waiting", run.waiting);
      if (waiting) waiting.title = run.waiting || "";
      setText(tr, "duration", run.duration);
      setStarted(tr, run);
      /* A finished run's error sits under its status, never under "Waiting for". */
      var error = tr.querySelector('[data-field="error"]');
      if (run.error && !error) {
        error = document.createElement("span");
        error.className = "error-line clamp";
        error.setAttribute("data-field", "error");
        tr.querySelector("td.state").appendChild(error);
      }
      if (error) {
        error.textContent = run.error || "";
        error.title = run.error || "";
      }
    });
  }

  /* A run's durable streams, followed as they grow: chunks appended as text, a reset
     marked where an attempt's chunks became void (the retry streams again below it). */
  function follow(box) {
    if (!window.EventSource || box.hasAttribute("data-following")) return;
    box.setAttribute("data-following", "");
    var text = box.querySelector("[data-stream-text]");
    var source = new EventSource(box.getAttribute("data-stream-url"));
    source.addEventListener("chunk", function (e) {
      var value = JSON.parse(e.data);
      var piece = document.createElement("span");
      piece.textContent = typeof value === "string" ? value : JSON.stringify(value) + "\n";
      text.appendChild(piece);
    });
    source.addEventListener("reset", function (e) {
      var reset = JSON.parse(e.data);
      var mark = document.createElement("div");
      mark.className = "stream-reset";
      mark.textContent = "attempt " + reset.attempt + " of " + reset.step_key +
        " did not finish: its chunks above are void";
      text.appendChild(mark);
    });
    source.addEventListener("end", function () {
      source.close();
      box.setAttribute("data-ended", "");
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll("[data-stream]"), follow);

  /* A run's page shows one read of its run: when the run changes, the page is fetched
     again and its sections replaced together, so no badge ever shows another moment. */
  var live = document.querySelector("[data-live-run]");
  if (live) {
    var version = live.getAttribute("data-version");
    var refreshing = false;
    var pending = false;
    var refresh = function () {
      if (refreshing) {
        pending = true;
        return;
      }
      refreshing = true;
      pending = false;
      fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (response) { return response.ok ? response.text() : null; })
        .then(function (html) {
          if (!html) return;
          var fresh = new DOMParser().parseFromString(html, "text/html");
          var shown = fresh.querySelector("[data-live-run]");
          if (shown) {  /* the version of what the page now shows */
            version = shown.getAttribute("data-version");
            live.setAttribute("data-version", version);
          }
          Array.prototype.forEach.call(fresh.querySelectorAll("[data-live-section]"), function (el) {
            var old = document.getElementById(el.id);
            /* A form asking for the same things keeps what the operator typed in it. */
            var keep = old && old.getAttribute("data-keep");
            if (keep && keep === el.getAttribute("data-keep")) return;
            if (old) old.replaceWith(document.importNode(el, true));
          });
          /* Streams begun since: followed too (those followed already keep their text). */
          var streams = document.getElementById("streams");
          Array.prototype.forEach.call(fresh.querySelectorAll("[data-stream]"), function (el) {
            if (!streams) return;
            var name = el.getAttribute("data-stream");
            var known = Array.prototype.some.call(streams.querySelectorAll("[data-stream]"),
              function (box) { return box.getAttribute("data-stream") === name; });
            if (known) return;
            var box = document.importNode(el, true);
            streams.appendChild(box);
            streams.hidden = false;
            follow(box);
          });
        })
        .finally(function () {
          refreshing = false;
          if (pending) refresh();
        });
    };
    watch([live.getAttribute("data-run-id")], true, function (run) {
      if (run.version !== version) {
        version = run.version;
        live.setAttribute("data-version", version);
        refresh();
      }
    });
  }
})();
