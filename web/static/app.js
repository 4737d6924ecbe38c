/* Loopwatch pages work without this file. It adds copy buttons, open/close all, loading of
   step bodies on demand, keyboard moves, and live updates of the list and of a running trace. */
"use strict";
(function () {
  function copyText(el, button) {
    var text = el.getAttribute("data-copy");
    function done() {
      button.textContent = "copied";
      setTimeout(function () { button.textContent = "copy"; }, 1500);
    }
    function fallback() {
      var range = document.createRange();
      range.selectNodeContents(el);
      var selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      try { if (document.execCommand("copy")) { done(); } } catch (e) { /* text stays selected */ }
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, fallback);
    } else {
      fallback();
    }
  }

  function addCopyButtons(root) {
    root.querySelectorAll("[data-copy]").forEach(function (el) {
      if (el.hasAttribute("data-copy-ready")) { return; }
      el.setAttribute("data-copy-ready", "");
      var button = document.createElement("button");
      button.type = "button";
      button.className = "copy";
      button.textContent = "copy";
      button.setAttribute("aria-label", "copy " + (el.getAttribute("data-copy-label") || "value"));
      button.addEventListener("click", function () { copyText(el, button); });
      el.insertAdjacentElement("afterend", button);
    });
  }

  function parse(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    return document.importNode(doc.body.firstElementChild, true);
  }

  function get(url, accept) {
    return fetch(url, { headers: { Accept: accept }, credentials: "same-origin" }).then(function (r) {
      if (!r.ok) { throw new Error(String(r.status)); }
      return accept === "application/json" ? r.json() : r.text();
    });
  }

  /* Step bodies of long traces load when their row opens. */
  function load(row) {
    var body = row.querySelector(":scope > .row-body.lazy");
    if (!body) { return Promise.resolve(row); }
    if (body.loading) { return body.loading; }
    body.classList.add("loading");
    var link = body.querySelector("a[href]");
    body.loading = get(link.getAttribute("href") + "?part=body", "text/html").then(function (html) {
      var part = parse(html);
      body.replaceChildren(part);
      body.classList.remove("lazy", "loading");
      addCopyButtons(body);
      return row;
    }).catch(function () {
      body.classList.remove("loading");
      body.loading = null;
      return row;
    });
    return body.loading;
  }

  function rows() { return Array.prototype.slice.call(document.querySelectorAll("details.row")); }

  function rowOf(id) {
    var el = document.getElementById(id);
    if (el) { return el.closest("details.row"); }
    var seq = /^s(\d+)-/.exec(id);
    if (seq) { return document.querySelector('details.row[data-seq="' + seq[1] + '"]'); }
    // An MCP execution of a tool call in a body not loaded yet: the row lists its id.
    var mcp = /^mcp-(.+)$/.exec(id);
    return mcp ? document.querySelector('details.row[data-mcp~="' + CSS.escape(mcp[1]) + '"]') : null;
  }

  /* Show the element a link points at: open its row, load it, focus it. */
  function reveal(id, focus) {
    var row = rowOf(id);
    if (!row) { return; }
    row.open = true;
    load(row).then(function () {
      var target = document.getElementById(id);
      if (!target) { return; }
      var more = target.closest("details.more");
      if (more && more !== target) { more.open = true; }
      if (focus) {
        var focusable = target.matches("details.row") ? target.querySelector("summary") : target;
        focusable.focus({ preventScroll: true });
        target.scrollIntoView({ block: "start" });
      }
    });
  }

  function onHash() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    if (id) { reveal(id, true); }
  }

  /* A link to another step's page, from a step body on the trace page, stays on this page. */
  function onClick(event) {
    var link = event.target.closest("a[data-step]");
    if (!link || !document.getElementById("rows") || event.ctrlKey || event.metaKey) { return; }
    var hash = link.getAttribute("href").split("#")[1];
    if (!hash || !document.getElementById("step-" + link.getAttribute("data-step"))) { return; }
    event.preventDefault();
    var row = document.getElementById("step-" + link.getAttribute("data-step"));
    row.open = true;
    load(row).then(function () {
      if (window.location.hash === "#" + hash) { onHash(); } else { window.location.hash = hash; }
    });
  }

  function focusRow(row) {
    var summary = row.querySelector("summary");
    summary.focus({ preventScroll: true });
    summary.scrollIntoView({ block: "nearest" });
  }

  /* The next (step 1) or previous (-1) row after the focused one, of violations only if asked. */
  function move(step, onlyViolations) {
    var all = rows();
    var here = document.activeElement && document.activeElement.closest("details.row");
    var at = here ? all.indexOf(here) : (step > 0 ? -1 : all.length);
    var candidates = all.filter(function (row, i) {
      return (!onlyViolations || row.hasAttribute("data-violations")) && (step > 0 ? i > at : i < at);
    });
    var row = step > 0 ? candidates[0] : candidates[candidates.length - 1];
    if (row) { focusRow(row); }
  }

  function moveInList(step) {
    var links = Array.prototype.slice.call(document.querySelectorAll("#trace-list a.run-link"));
    if (!links.length) { return; }
    var index = links.indexOf(document.activeElement) + step;
    if (links.indexOf(document.activeElement) < 0) { index = step > 0 ? 0 : links.length - 1; }
    var link = links[Math.max(0, Math.min(index, links.length - 1))];
    link.focus();
    link.scrollIntoView({ block: "nearest" });
  }

  function onKey(event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    var field = event.target.closest("input, textarea, select");
    if (field) {
      if (event.key === "Escape") { field.blur(); }
      return;
    }
    var onTrace = !!document.getElementById("rows");
    var actions = {
      "/": function () { var q = document.getElementById("q"); if (q) { q.focus(); q.select(); } },
      j: function () { if (onTrace) { move(1, false); } else { moveInList(1); } },
      k: function () { if (onTrace) { move(-1, false); } else { moveInList(-1); } },
      n: function () { if (onTrace) { move(1, true); } },
      p: function () { if (onTrace) { move(-1, true); } }
    };
    var action = actions[event.key];
    if (action) { event.preventDefault(); action(); }
  }

  function button(label, onclick) {
    var b = document.createElement("button");
    b.type = "button";
    b.className = "quiet";
    b.textContent = label;
    b.addEventListener("click", onclick);
    return b;
  }

  function addTraceTools() {
    var head = document.querySelector(".wf-head");
    if (!head) { return; }
    var tools = document.createElement("div");
    tools.className = "wf-tools";
    if (!document.querySelector(".row-body.lazy")) {
      tools.appendChild(button("Open all steps", function () { rows().forEach(function (r) { r.open = true; }); }));
    }
    tools.appendChild(button("Close all", function () { rows().forEach(function (r) { r.open = false; }); }));
    if (document.querySelector("details.row[data-violations]")) {
      tools.appendChild(button("← Previous violation", function () { move(-1, true); }));
      tools.appendChild(button("Next violation →", function () { move(1, true); }));
    }
    head.appendChild(tools);
    var keys = head.querySelector("[data-keys]");
    if (keys) { keys.hidden = false; }
  }

  /* A trace that can still grow: new steps are appended, changed rows replaced, every bar
     rescaled, the header replaced when its status changes. */
  function follow(section) {
    var url = section.getAttribute("data-live");
    var container = document.getElementById("rows");
    function later(seconds) { setTimeout(tick, seconds * 1000); }
    function apply(data) {
      var top = document.getElementById("trace-top");
      if (top && data.top) { top.replaceWith(parse(data.top)); addCopyButtons(document.getElementById("trace-top")); }
      data.rows.forEach(function (entry) {
        var fresh = parse(entry.html);
        var old = document.getElementById(entry.id);
        if (!old) {
          fresh.classList.add("fresh");
          container.appendChild(fresh);
          addCopyButtons(fresh);
          return;
        }
        var loaded = old.querySelector(":scope > .row-body:not(.lazy)");
        if (loaded && fresh.querySelector(":scope > .row-body.lazy")) {
          old.querySelector(":scope > summary").replaceWith(fresh.querySelector(":scope > summary"));
        } else {
          fresh.open = old.open;
          old.replaceWith(fresh);
          addCopyButtons(fresh);
        }
      });
      var elapsed = document.getElementById("steps-elapsed");
      if (elapsed && data.elapsed) { elapsed.textContent = data.elapsed; }
      container.setAttribute("data-span", String(data.span));
      document.querySelectorAll("svg.c-bar").forEach(function (svg) {
        svg.setAttribute("viewBox", "0 0 " + Math.ceil(data.span) + " 10");
      });
      section.setAttribute("data-after", String(data.after));
      section.setAttribute("data-known", data.known || "");
      section.setAttribute("data-shown-status", data.status || "");
      section.setAttribute("data-running", data.running ? "true" : "false");
    }
    /* A running trace is asked every 2 s; any other every 5 s: it can still grow. */
    function pace() { return section.getAttribute("data-running") === "true" ? 2 : 5; }
    function tick() {
      if (document.hidden) { return later(3); }
      var query = "?after=" + encodeURIComponent(section.getAttribute("data-after")) +
        "&known=" + encodeURIComponent(section.getAttribute("data-known")) +
        "&status=" + encodeURIComponent(section.getAttribute("data-shown-status"));
      get(url + query, "application/json").then(function (data) {
        if (data.changed) { apply(data); }
        later(pace());
      }).catch(function () { later(10); });
    }
    later(pace());
  }

  function poll(list) {
    var url = list.getAttribute("data-poll");
    var live = document.createElement("span");
    live.className = "live";
    live.textContent = "live";
    live.title = "new traces appear here as they are recorded";
    document.querySelector(".page-head h1").appendChild(live);

    function later(seconds) { setTimeout(tick, seconds * 1000); }
    function refresh() {
      return get(window.location.href, "text/html").then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("trace-list");
        if (!fresh) { return; }
        var seen = {};
        list.querySelectorAll("tr[data-id]").forEach(function (tr) { seen[tr.getAttribute("data-id")] = true; });
        fresh = document.importNode(fresh, true);
        fresh.querySelectorAll("tr[data-id]").forEach(function (tr) {
          if (!seen[tr.getAttribute("data-id")]) { tr.classList.add("fresh"); }
        });
        list.replaceWith(fresh);
        list = fresh;
        addCopyButtons(list);
      });
    }
    function tick() {
      if (document.hidden) { return later(4); }
      fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
        .then(function (r) {
          if (r.status === 401) { live.textContent = "paused"; throw new Error("stop"); }
          if (!r.ok) { throw new Error("retry"); }
          return r.json();
        })
        .then(function (data) {
          var first = data.traces[0];
          var top = first ? first.id + "|" + first.updated_at : "";
          if (top === list.getAttribute("data-top")) { return later(3); }
          return refresh().then(function () { later(3); });
        })
        .catch(function (e) { if (e.message !== "stop") { later(15); } });
    }
    later(3);
  }

  /* A step's fork form: its request sent again, changed, through the gateway; on success the
     fork's trace opens. The provider key goes in its own header and is never kept here. */
  function onFork(event) {
    var form = event.target;
    if (!form.matches || !form.matches("form[data-fork]")) { return; }
    event.preventDefault();
    var out = form.querySelector("[data-fork-result]");
    var body = { at_step: Number(form.getAttribute("data-step")) };
    var model = form.elements.model.value.trim();
    if (model) { body.model = model; }
    var params = form.elements.params.value.trim();
    if (params) {
      try { body.params = JSON.parse(params); } catch (e) { out.textContent = "Parameters are not JSON."; return; }
    }
    var headers = { "Content-Type": "application/json", Accept: "application/json" };
    var key = form.elements.key.value;
    if (key) { headers["X-Loopwatch-Provider-Authorization"] = "Bearer " + key; }
    out.textContent = "forking…";
    fetch(form.getAttribute("data-fork"), {
      method: "POST", headers: headers, body: JSON.stringify(body), credentials: "same-origin"
    }).then(function (r) {
      return r.json().then(function (data) { return { ok: r.ok, data: data }; });
    }).then(function (answer) {
      var data = answer.data;
      if (answer.ok && data.url) { window.location.assign(data.url); return; }
      var error = data.error || {};
      out.textContent = error.message || ("fork failed: " + JSON.stringify(data).slice(0, 200));
    }).catch(function (e) { out.textContent = "fork failed: " + e.message; });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.addEventListener("submit", onFork);
    addCopyButtons(document);
    addTraceTools();
    var filters = document.querySelector(".filters-box:not([data-active])");
    if (filters && window.matchMedia("(max-width: 700px)").matches) { filters.open = false; }
    document.addEventListener("keydown", onKey);
    document.addEventListener("click", onClick);
    document.addEventListener("toggle", function (event) {
      if (event.target.matches && event.target.matches("details.row") && event.target.open) { load(event.target); }
    }, true);
    window.addEventListener("hashchange", onHash);
    if (window.location.hash) { onHash(); }
    var section = document.querySelector(".waterfall[data-live]");
    if (section) { follow(section); }
    var list = document.querySelector("#trace-list[data-poll]");
    if (list) { poll(list); }
  });
})();
