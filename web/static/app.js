// Delegation Studio's only script. Every page renders whole without it; on
// a session page it keeps the page live: it opens the session's websocket
// from the last seq the page shows, and applies the patches each event
// carries (server-rendered fragments). A reconnect resumes after the last
// seq applied, so nothing is missed or shown twice.
(function () {
  "use strict";

  function applyPatch(p) {
    var targets = document.querySelectorAll(p.sel);
    for (var i = 0; i < targets.length; i++) {
      var el = targets[i];
      if (p.op === "text") {
        el.appendChild(document.createTextNode(p.html));
        continue;
      }
      var tpl = document.createElement("template");
      tpl.innerHTML = p.html;
      if (p.op === "append") {
        el.appendChild(tpl.content.cloneNode(true));
      } else if (p.op === "replace") {
        el.replaceWith(tpl.content.cloneNode(true));
      } else if (p.op === "inner") {
        el.replaceChildren(tpl.content.cloneNode(true));
      }
    }
  }

  function markSelected(root) {
    var sel = new URLSearchParams(location.search).get("agent");
    if (!sel) return;
    var g = root.querySelector('[data-testid="node-' + CSS.escape(sel) + '"]');
    if (g) g.classList.add("node-selected");
  }

  function live(page) {
    var id = page.dataset.session;
    var last = parseInt(page.dataset.lastSeq || "0", 10);
    var proto = location.protocol === "https:" ? "wss:" : "ws:";
    var delay = 500;
    function connect() {
      var ws = new WebSocket(proto + "//" + location.host + "/api/sessions/" + encodeURIComponent(id) + "/live?after=" + last);
      ws.onopen = function () { delay = 500; };
      ws.onmessage = function (m) {
        var ev;
        try { ev = JSON.parse(m.data); } catch (e) { return; }
        if (ev.seq > 0) {
          if (ev.seq <= last) return; // already shown
          last = ev.seq;
          page.dataset.lastSeq = String(last);
        }
        (ev.patches || []).forEach(applyPatch);
        if (ev.type === "agent.started" || ev.type === "agent.finished" || ev.type === "session.finished") {
          markSelected(page);
        }
        if (ev.type === "session.finished") {
          page.removeAttribute("data-running");
        }
      };
      ws.onclose = function () {
        if (!page.hasAttribute("data-running")) return;
        setTimeout(connect, delay);
        delay = Math.min(delay * 2, 8000);
      };
    }
    connect();
  }

  // A running model call shows how long it has been running.
  function tick() {
    var now = Date.now();
    document.querySelectorAll(".turn.running .elapsed[data-started]").forEach(function (el) {
      var s = (now - Date.parse(el.dataset.started)) / 1000;
      el.textContent = "running " + (s < 0 ? 0 : s).toFixed(1) + " s";
    });
  }

  // Long message bodies load when opened.
  document.addEventListener("click", function (e) {
    var a = e.target.closest && e.target.closest("a[data-load]");
    if (!a) return;
    e.preventDefault();
    fetch(a.dataset.load + "?fragment=1", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var li = a.closest("li");
        var body = li && li.querySelector("pre.body");
        var tpl = document.createElement("template");
        tpl.innerHTML = html;
        if (body) body.replaceWith(tpl.content.cloneNode(true)); else a.before(tpl.content.cloneNode(true));
        a.remove();
      });
  });

  // The step scrubber moves without a reload.
  document.addEventListener("input", function (e) {
    var form = e.target.closest && e.target.closest("form[data-scrub]");
    if (!form) return;
    var step = e.target.value;
    var out = form.querySelector("output");
    if (out) out.textContent = step + " / " + e.target.max;
    fetch("/sessions/" + encodeURIComponent(form.dataset.scrub) + "/scrub?step=" + step, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var box = document.getElementById("scrubber");
        var tpl = document.createElement("template");
        tpl.innerHTML = html;
        var table = tpl.content.querySelector("table");
        var label = tpl.content.querySelector("p.muted");
        var old = box.querySelector("table");
        if (table && old) old.replaceWith(table);
        var oldLabel = box.querySelector("p.muted");
        if (label && oldLabel) oldLabel.replaceWith(label);
      });
  });

  document.addEventListener("DOMContentLoaded", function () {
    var page = document.querySelector(".session[data-session]");
    if (page && page.hasAttribute("data-running")) live(page);
    setInterval(tick, 250);
  });
})();

// The team editor's live preview: as the user types, a debounced POST of the
// form to /teams/preview (the form's own _csrf field goes with it) replaces
// the preview's contents, and the prompt sizes beside the form follow.
// Without this script the form's Preview button does the same with a reload.
(function () {
  "use strict";

  function syncSizes(form, preview) {
    preview.querySelectorAll("[data-prompt-size]").forEach(function (li) {
      var text = li.querySelector(".size-text");
      if (!text) return;
      form.querySelectorAll("[data-size-for]").forEach(function (el) {
        if (el.dataset.sizeFor === li.dataset.promptSize) el.textContent = text.textContent;
      });
    });
  }

  function editor(form) {
    var preview = document.getElementById("team-preview");
    if (!preview) return;
    var timer = null, sent = 0;
    function refresh() {
      var mine = ++sent;
      var data = new FormData(form);
      data.set("action", "preview");
      fetch("/teams/preview", { method: "POST", body: data, credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) {
          if (mine !== sent) return; // a later request is on its way
          var tpl = document.createElement("template");
          tpl.innerHTML = html;
          preview.replaceChildren(tpl.content.cloneNode(true));
          preview.classList.remove("stale");
          syncSizes(form, preview);
        })
        .catch(function () { if (mine === sent) preview.classList.remove("stale"); });
    }
    function schedule() {
      preview.classList.add("stale");
      clearTimeout(timer);
      timer = setTimeout(refresh, 300);
    }
    form.addEventListener("input", schedule);
    form.addEventListener("change", schedule);
  }

  // Forms that delete something ask first.
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) e.preventDefault();
  });

  document.addEventListener("DOMContentLoaded", function () {
    var form = document.querySelector("form[data-team-form]");
    if (form) editor(form);
  });
})();
