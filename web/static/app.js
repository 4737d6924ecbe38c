/* Loopwatch pages work without this file; it adds copy buttons, expand-all and live updates. */
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

  function addExpandAll() {
    var holder = document.querySelector("[data-expand-all]");
    if (!holder || !document.querySelector("details.more")) { return; }
    var button = document.createElement("button");
    button.type = "button";
    button.className = "link";
    button.textContent = "expand all long texts";
    var open = false;
    button.addEventListener("click", function () {
      open = !open;
      document.querySelectorAll("details.more").forEach(function (d) { d.open = open; });
      button.textContent = open ? "collapse all long texts" : "expand all long texts";
    });
    holder.appendChild(button);
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
      return fetch(window.location.href, { headers: { Accept: "text/html" }, credentials: "same-origin" })
        .then(function (r) { return r.text(); })
        .then(function (html) {
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

  document.addEventListener("DOMContentLoaded", function () {
    addCopyButtons(document);
    addExpandAll();
    var list = document.querySelector("#trace-list[data-poll]");
    if (list) { poll(list); }
  });
})();
