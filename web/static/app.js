// Delegation Studio's only script. Every page renders whole without it; on
// a session page it keeps the page live: it opens the session's websocket
// from the last seq the page shows, and applies the patches each event
// carries (server-rendered fragments). A reconnect resumes after the last
// seq applied, so nothing is missed or shown twice.
(function () {
  "use strict";

  // fragment parses a patch's HTML; SVG content is parsed inside an <svg>.
  function fragment(p) {
    var tpl = document.createElement("template");
    if (!p.svg) {
      tpl.innerHTML = p.html || "";
      return tpl.content;
    }
    tpl.innerHTML = '<svg xmlns="http://www.w3.org/2000/svg">' + (p.html || "") + "</svg>";
    var out = document.createDocumentFragment();
    var svg = tpl.content.firstChild;
    while (svg && svg.firstChild) out.appendChild(svg.firstChild);
    return out;
  }

  function keyOf(el) {
    return el.nodeType === 1 ? (el.getAttribute("data-k") || el.id || "") : "";
  }

  // appendTo adds a fragment's elements at the end of el, each in place of
  // a child with the same key if there is one (a patch applied twice
  // changes nothing).
  function appendTo(el, frag) {
    var nodes = Array.prototype.slice.call(frag.childNodes);
    nodes.forEach(function (n) {
      var key = keyOf(n);
      if (key) {
        for (var c = el.firstElementChild; c; c = c.nextElementSibling) {
          if (keyOf(c) === key) {
            c.replaceWith(n);
            return;
          }
        }
      }
      el.appendChild(n);
    });
  }

  function applyPatch(p) {
    var targets = document.querySelectorAll(p.sel);
    for (var i = 0; i < targets.length; i++) {
      var el = targets[i];
      switch (p.op) {
        case "text":
          el.textContent = p.html || "";
          break;
        case "stream": {
          // Text streamed from p.at on; a row drawn later may have it already.
          var cur = el.textContent, at = p.at || 0;
          if (cur.length <= at) el.textContent = cur + (p.html || "");
          break;
        }
        case "attrs":
          Object.keys(p.attrs || {}).forEach(function (k) {
            if (p.attrs[k] === null) el.removeAttribute(k); else el.setAttribute(k, p.attrs[k]);
          });
          break;
        case "remove":
          el.remove();
          break;
        case "append":
          appendTo(el, fragment(p));
          break;
        case "replace":
          el.replaceWith(fragment(p));
          break;
        case "inner":
          el.replaceChildren(fragment(p));
          break;
        case "after":
          el.after(fragment(p));
          break;
        case "before":
          el.before(fragment(p));
          break;
      }
    }
  }

  // The tree marks the delegation the panel shows.
  function markSelected(page) {
    var shown = page.querySelector("#delegation [data-came-back]");
    var id = shown ? shown.getAttribute("data-came-back") : "";
    var want = id ? page.querySelector('#tree [data-testid="node-' + CSS.escape(id) + '"]') : null;
    page.querySelectorAll("#tree .node-selected").forEach(function (g) { if (g !== want) g.classList.remove("node-selected"); });
    if (want && !want.classList.contains("node-selected")) want.classList.add("node-selected");
  }

  // choice is what this page shows, for the server to draw a sync for it.
  function choice() {
    var q = new URLSearchParams(location.search), out = "";
    ["agent", "timeline"].forEach(function (k) {
      if (q.get(k)) out += "&" + k + "=" + encodeURIComponent(q.get(k));
    });
    var scrub = document.getElementById("scrubber");
    var range = scrub && scrub.querySelector("input[type=range]");
    if (range && !scrub.hasAttribute("data-follow")) out += "&step=" + encodeURIComponent(range.value);
    return out;
  }

  function live(page) {
    var id = page.dataset.session;
    var last = parseInt(page.dataset.lastSeq || "0", 10);
    var proto = location.protocol === "https:" ? "wss:" : "ws:";
    var delay = 500;
    function connect() {
      var ws = new WebSocket(proto + "//" + location.host + "/api/sessions/" + encodeURIComponent(id) +
        "/live?view=1&after=" + last + choice());
      ws.onopen = function () { delay = 500; page.dataset.live = "open"; };
      ws.onmessage = function (m) {
        // A message is one event, or a burst of them, one JSON value a line.
        String(m.data).split("\n").forEach(function (line) {
          if (!line) return;
          var ev;
          try { ev = JSON.parse(line); } catch (e) { return; }
          if (ev.seq > 0) {
            if (ev.seq <= last) return; // already shown
            last = ev.seq;
          }
          if (ev.type === "sync") page.dataset.syncedAt = String(ev.seq);
          (ev.patches || []).forEach(applyPatch);
        });
        page.dataset.lastSeq = String(last);
        markSelected(page);
      };
      ws.onclose = function () {
        page.dataset.live = "closed";
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

  // The step scrubber moves without a reload; at the newest call it follows
  // the calls as they come. The address says the step, so a reload shows it.
  document.addEventListener("input", function (e) {
    var form = e.target.closest && e.target.closest("form[data-scrub]");
    if (!form) return;
    var step = e.target.value, box = document.getElementById("scrubber");
    var follow = step === e.target.max;
    var out = form.querySelector("[data-scrub-step]");
    if (out) out.textContent = step;
    box.toggleAttribute("data-follow", follow);
    var q = new URLSearchParams(location.search);
    if (follow) q.delete("step"); else q.set("step", step);
    var qs = q.toString();
    history.replaceState(null, "", location.pathname + (qs ? "?" + qs : "") + location.hash);
    fetch("/sessions/" + encodeURIComponent(form.dataset.scrub) + "/scrub?step=" + (follow ? 0 : step), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var tpl = document.createElement("template");
        tpl.innerHTML = html;
        var view = tpl.content.querySelector("[data-scrub-view]");
        var old = box.querySelector("[data-scrub-view]");
        if (view && old && (box.hasAttribute("data-follow") === follow)) old.replaceWith(view);
      });
  });

  // follow keeps a part of a page that shows running sessions up to date
  // (a lesson's run, a comparison): it listens to each session's websocket
  // from the seq the page shows (data-live-sessions="id:seq …") and, when
  // any moves on, fetches the part again (data-live-fragment), drawn by
  // the server as a reload would draw it, at most every 250 ms. A part that
  // shows no running session any more stops.
  function follow(box) {
    var url = box.getAttribute("data-live-fragment"), sockets = [], timer = null, busy = false, again = false, closed = false;
    var proto = location.protocol === "https:" ? "wss:" : "ws:";
    function stop() {
      closed = true;
      sockets.forEach(function (ws) { ws.onclose = null; ws.close(); });
    }
    function refresh() {
      timer = null;
      if (busy) { again = true; return; }
      busy = true;
      fetch(url, { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) {
          var tpl = document.createElement("template");
          tpl.innerHTML = html;
          var fresh = tpl.content.firstElementChild;
          if (!fresh || !box.parentNode) return;
          box.replaceWith(fresh);
          box = fresh;
          if (!fresh.hasAttribute("data-live-fragment")) {
            stop();
            fresh.setAttribute("data-live-done", "");
          }
        })
        .catch(function () {})
        .then(function () {
          busy = false;
          if (again && !closed) { again = false; schedule(); }
        });
    }
    function schedule() {
      if (!timer && !closed) timer = setTimeout(refresh, 250);
    }
    (box.getAttribute("data-live-sessions") || "").split(" ").forEach(function (pair) {
      var i = pair.lastIndexOf(":");
      if (i <= 0) return;
      var id = pair.slice(0, i), after = pair.slice(i + 1), delay = 500;
      function connect() {
        var ws = new WebSocket(proto + "//" + location.host + "/api/sessions/" + encodeURIComponent(id) + "/live?after=" + after);
        ws.onmessage = function (m) {
          String(m.data).split("\n").forEach(function (line) {
            try { var ev = JSON.parse(line); if (ev.seq > 0) after = String(ev.seq); } catch (e) { /* not an event */ }
          });
          schedule();
        };
        ws.onclose = function () {
          if (closed) return;
          schedule(); // it may have ended while the socket was away
          setTimeout(connect, delay);
          delay = Math.min(delay * 2, 8000);
        };
        sockets.push(ws);
      }
      connect();
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    // A form that came back: its problems head the page; the focus goes there.
    var summary = document.getElementById("error-summary");
    if (summary) summary.focus();
    document.querySelectorAll("[data-live-fragment]").forEach(follow);
    // A step not made yet shows the newest, and follows: so says the address.
    var box = document.getElementById("scrubber"), q = new URLSearchParams(location.search);
    if (box && box.hasAttribute("data-follow") && q.has("step")) {
      q.delete("step");
      var qs = q.toString();
      history.replaceState(null, "", location.pathname + (qs ? "?" + qs : "") + location.hash);
    }
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

  // fieldId is the id the page gives a field's input (templates.FieldID).
  function fieldId(key) {
    return key === "" ? "team-form" : "f-" + key.replace(/\[/g, "-").replace(/\]/g, "").replace(/\./g, "-");
  }

  // showErrors puts each problem of the live check at its field, and takes
  // away those of the fields that have none any more.
  function showErrors(form, fields) {
    form.querySelectorAll("ul.field-errors").forEach(function (ul) { ul.remove(); });
    form.querySelectorAll(".field.invalid").forEach(function (f) { f.classList.remove("invalid"); });
    form.querySelectorAll("[aria-invalid=true]").forEach(function (el) { el.setAttribute("aria-invalid", "false"); });
    Object.keys(fields || {}).forEach(function (key) {
      var el = document.getElementById(fieldId(key));
      if (!el) return;
      var box = el.matches("fieldset") ? el : (el.closest(".field") || el);
      var ul = document.createElement("ul");
      ul.className = "field-errors";
      ul.setAttribute("data-testid", "field-error");
      ul.setAttribute("data-field", key);
      fields[key].forEach(function (m) {
        var li = document.createElement("li");
        li.textContent = m;
        ul.appendChild(li);
      });
      if (box.matches("fieldset")) {
        var after = box.querySelector(":scope > .sub-actions") || box.querySelector(":scope > legend");
        if (after) after.after(ul); else box.prepend(ul);
      } else {
        box.classList.add("invalid");
        box.appendChild(ul);
      }
      if (el.matches("input, select, textarea")) el.setAttribute("aria-invalid", "true");
    });
  }

  // A fork's tools are its parent's: its checkboxes are off while it is one.
  function forkTools(form, select) {
    var key = select.name.replace(/\.mode$/, ".tools");
    var box = form.querySelector('[data-key="' + CSS.escape(key) + '"]');
    if (!box) return;
    var fork = select.value === "fork";
    box.classList.toggle("disabled", fork);
    box.querySelectorAll("input[type=checkbox]").forEach(function (c) { c.disabled = fork; });
    var hint = box.querySelector("[data-fork-tools]");
    if (hint) hint.hidden = !fork;
  }

  function editor(form) {
    var preview = document.getElementById("team-preview");
    if (!preview) return;
    var staleNote = document.querySelector("[data-stale-note]");
    var timer = null, sent = 0;
    function refresh() {
      var mine = ++sent;
      var data = new FormData(form);
      data.set("action", "preview");
      fetch("/teams/preview?check=1", { method: "POST", body: data, credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
        .then(function (res) {
          if (mine !== sent) return; // a later request is on its way
          if (res.built) {
            var tpl = document.createElement("template");
            tpl.innerHTML = res.preview;
            preview.replaceChildren(tpl.content.cloneNode(true));
            syncSizes(form, preview);
          }
          // A team that does not build keeps the last preview that did.
          preview.classList.toggle("stale", !res.built);
          if (staleNote) staleNote.hidden = res.built;
          showErrors(form, res.fields);
          var notice = document.getElementById("team-notice");
          if (notice) notice.innerHTML = res.notice;
          var top = document.getElementById("team-top-errors");
          if (top) top.innerHTML = res.top;
          var summary = document.getElementById("error-summary");
          if (summary) summary.remove(); // the fields say it now, as it is
          form.dataset.checked = String(mine);
        })
        .catch(function () { if (mine === sent) preview.classList.remove("stale"); });
    }
    function schedule(e) {
      if (e && e.target && e.target.matches && e.target.matches('select[name$=".mode"]')) forkTools(form, e.target);
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
