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
    var shown = page.querySelector("#delegation [data-shown]");
    var id = shown ? shown.getAttribute("data-shown") : "";
    var want = (id && page.querySelector('#tree [data-testid="node-' + CSS.escape(id) + '"]')) ||
      page.querySelector("#tree g.node"); // not started yet: the main agent
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

  function lastSeq(page) { return parseInt(page.dataset.lastSeq || "0", 10); }

  // A timeline at the bottom of its scroll box stays there as lanes come;
  // one scrolled up stays put.
  function keepBottom(page, fn) {
    var body = page.querySelector("#timeline [data-wf-body]");
    var at = body && body.scrollTop + body.clientHeight >= body.scrollHeight - 4;
    fn();
    body = page.querySelector("#timeline [data-wf-body]");
    if (at && body) body.scrollTop = body.scrollHeight;
  }

  function live(page) {
    var id = page.dataset.session;
    var proto = location.protocol === "https:" ? "wss:" : "ws:";
    var delay = 500;
    function connect() {
      var ws = new WebSocket(proto + "//" + location.host + "/api/sessions/" + encodeURIComponent(id) +
        "/live?view=1&after=" + lastSeq(page) + choice());
      ws.onopen = function () { delay = 500; page.dataset.live = "open"; };
      ws.onmessage = function (m) {
        keepBottom(page, function () {
          // A message is one event, or a burst of them, one JSON value a line.
          String(m.data).split("\n").forEach(function (line) {
            if (!line) return;
            var ev;
            try { ev = JSON.parse(line); } catch (e) { return; }
            if (ev.seq > 0) {
              if (ev.seq <= lastSeq(page)) return; // already shown
              page.dataset.lastSeq = String(ev.seq);
            }
            if (ev.type === "sync") page.dataset.syncedAt = String(ev.seq);
            (ev.patches || []).forEach(applyPatch);
          });
        });
        markSelected(page);
        zoomTree(page, 0);
        grow();
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

  // Running bars grow with the clock between the server's patches: each
  // timeline's axis reaches now, counted from the last time the server
  // said what now was (data-now), so the browser's clock need not agree.
  var seenNow = new WeakMap();
  function grow() {
    var page = document.querySelector(".session[data-session]");
    var running = page && page.hasAttribute("data-running");
    document.querySelectorAll("#timeline:not([data-at])").forEach(function (tl) {
      var t0 = +tl.dataset.t0, span = +tl.dataset.span, now = +tl.dataset.now;
      var seen = seenNow.get(tl);
      if (!seen || seen.now !== now) { seen = { now: now, at: Date.now() }; seenNow.set(tl, seen); }
      if (!running) return;
      var clientNow = now + (Date.now() - seen.at);
      var grown = Math.max(span, clientNow - t0, 1);
      tl.querySelectorAll("svg.track").forEach(function (svg) { svg.setAttribute("viewBox", t0 + " 0 " + grown + " 20"); });
      tl.querySelectorAll(".bar.running rect[data-s]").forEach(function (r) {
        r.setAttribute("width", String(Math.max(clientNow - (+r.dataset.s), 0)));
      });
      if (grown > span * 1.02) drawAxis(tl, t0, grown);
    });
  }

  // drawAxis labels a timeline's axis as the server does (waterfall.go).
  function drawAxis(tl, t0, span) {
    var axis = tl.querySelector("[data-axis]");
    if (!axis) return;
    var step = 1;
    for (var k = 1; k <= 1e12; k *= 10) {
      var m = [1, 2, 5].find(function (m) { return span / (m * k) <= 6; });
      if (m) { step = m * k; break; }
    }
    var ns = "http://www.w3.org/2000/svg";
    axis.replaceChildren();
    for (var t = Math.ceil(t0 / step) * step; t < t0 + span * 0.95; t += step) {
      var text = document.createElementNS(ns, "text");
      text.setAttribute("x", ((t - t0) / span * 100).toFixed(2) + "%");
      text.setAttribute("y", "12");
      text.textContent = clock(tl, t, step);
      axis.appendChild(text);
    }
  }

  // clock writes a time of the axis in the page's language: the timeline
  // carries its units' formats (data-fmt-ms, -s, -min: "{n} ms").
  function clock(tl, ms, step) {
    var f = function (unit, n) { return (tl.dataset["fmt" + unit] || "{n} " + unit.toLowerCase()).replace("{n}", n); };
    if (step < 1000 && ms < 1000) return f("Ms", ms);
    if (ms < 60000 || step < 60000) return f("S", ms % 1000 === 0 ? (ms / 1000) : (ms / 1000).toFixed(1));
    return f("Min", Math.floor(ms / 60000));
  }

  // The tree zooms (its buttons) and pans (drag it); main, at its top
  // left, stays where the box opens. A tree drawn again keeps the zoom.
  var treeZoom = 1;
  function zoomTree(page, by) {
    var svg = page.querySelector("#tree svg.tree-svg");
    if (!svg) return;
    var w = +svg.dataset.w, h = +svg.dataset.h, box = page.querySelector("#tree");
    if (by === "fit") treeZoom = Math.min(1, (box.clientWidth - 4) / w);
    else if (by) treeZoom = Math.min(3, Math.max(0.25, treeZoom * by));
    svg.setAttribute("width", String(Math.round(w * treeZoom)));
    svg.setAttribute("height", String(Math.round(h * treeZoom)));
  }

  function treeTools(page) {
    var tools = page.querySelector("[data-tree-tools]");
    if (!tools) return;
    tools.hidden = false;
    tools.addEventListener("click", function (e) {
      var b = e.target.closest("button[data-zoom]");
      if (!b) return;
      var z = b.dataset.zoom;
      zoomTree(page, z === "in" ? 1.25 : z === "out" ? 0.8 : "fit");
    });
    var drag = null, moved = false;
    page.addEventListener("pointerdown", function (e) {
      var box = e.target.closest && e.target.closest("#tree");
      if (!box || e.button !== 0) return;
      drag = { box: box, x: e.clientX, y: e.clientY, left: box.scrollLeft, top: box.scrollTop };
      moved = false;
    });
    document.addEventListener("pointermove", function (e) {
      if (!drag) return;
      var dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (!moved && Math.abs(dx) + Math.abs(dy) < 5) return;
      moved = true;
      drag.box.classList.add("panning");
      drag.box.scrollLeft = drag.left - dx;
      drag.box.scrollTop = drag.top - dy;
    });
    document.addEventListener("pointerup", function () {
      if (drag) drag.box.classList.remove("panning");
      drag = null;
    });
    // A drag is not a click on the box it ends on.
    page.addEventListener("click", function (e) {
      if (moved && e.target.closest && e.target.closest("#tree")) { e.preventDefault(); moved = false; }
    }, true);
    // A box's whole task shows while it has the focus (the pointer has
    // its <title>).
    var tip = document.createElement("div");
    tip.className = "tree-tip";
    tip.hidden = true;
    tip.setAttribute("role", "tooltip");
    var card = page.querySelector(".tree-card");
    card.appendChild(tip);
    page.addEventListener("focusin", function (e) {
      var a = e.target.closest && e.target.closest("#tree a[aria-label]");
      if (!a) { tip.hidden = true; return; }
      var r = a.getBoundingClientRect(), c = card.getBoundingClientRect();
      tip.textContent = a.getAttribute("aria-label");
      tip.hidden = false;
      tip.style.left = Math.max(0, Math.min(r.left - c.left, c.width - 430)) + "px";
      tip.style.top = (r.bottom - c.top + 4) + "px";
    });
    page.addEventListener("focusout", function () { tip.hidden = true; });
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

  // A pane's inherited messages (a fork's whole inherited history) load
  // when they are opened, and again when a patch drew the pane anew.
  document.addEventListener("toggle", function (e) {
    var d = e.target;
    if (!d.open || !d.matches || !d.matches("details[data-src]")) return;
    var list = d.querySelector("ol[data-lazy]");
    if (!list || list.dataset.loading) return;
    list.dataset.loading = "1";
    fetch(d.dataset.src, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var tpl = document.createElement("template");
        tpl.innerHTML = html;
        list.replaceChildren(tpl.content);
        list.removeAttribute("data-lazy");
      })
      .finally(function () { delete list.dataset.loading; });
  }, true);

  // The step scrubber moves the whole page to that step without a reload:
  // it asks for every panel drawn at the step (the patches a reconnecting
  // page gets) and applies them, the range the user holds left in place.
  // At the newest step it follows the session again. The address says the
  // step, so a reload shows it.
  var scrubTimer = null, scrubAsked = 0;
  function scrubTo(page, step, follow, again) {
    var asked = ++scrubAsked;
    var q = new URLSearchParams(location.search);
    if (follow) q.delete("step"); else q.set("step", step);
    history.replaceState(null, "", location.pathname + (q.toString() ? "?" + q.toString() : "") + location.hash);
    q.set("step", follow ? "0" : step);
    fetch("/sessions/" + encodeURIComponent(page.dataset.session) + "/panels?" + q.toString(), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (ev) {
        if (asked !== scrubAsked) return; // the user moved on
        if (ev.seq < lastSeq(page)) { if (!again) scrubTo(page, step, follow, true); return; }
        keepBottom(page, function () {
          (ev.patches || []).forEach(function (p) {
            if (p.sel === "#scrubber" && p.op === "replace") {
              var tpl = document.createElement("template");
              tpl.innerHTML = p.html;
              var box = document.getElementById("scrubber");
              var view = tpl.content.querySelector("[data-scrub-view]"), old = box && box.querySelector("[data-scrub-view]");
              if (view && old) old.replaceWith(view);
              if (box) box.toggleAttribute("data-follow", follow);
              return;
            }
            applyPatch(p);
          });
        });
        page.dataset.lastSeq = String(ev.seq);
        page.dataset.scrubbedTo = String(step);
        markSelected(page);
        zoomTree(page, 0);
        grow();
      });
  }

  document.addEventListener("input", function (e) {
    var form = e.target.closest && e.target.closest("form[data-scrub]");
    if (!form) return;
    var page = document.querySelector(".session[data-session]");
    var step = e.target.value, follow = step === e.target.max;
    form.querySelectorAll("[data-scrub-step]").forEach(function (o) { o.textContent = step; });
    clearTimeout(scrubTimer);
    scrubTimer = setTimeout(function () { scrubTo(page, step, follow); }, 120);
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
    if (!page) return;
    treeTools(page);
    if (page.hasAttribute("data-running")) live(page);
    grow();
    setInterval(grow, 250);
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
