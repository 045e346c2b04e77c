// AgentOwl console: refresh what a visible page shows every 30 seconds
// (data-refresh-ms on <body>), pause while the tab is hidden (Page
// Visibility API) and refresh on return. Only the page's [data-live]
// regions are replaced, and never one holding a form control the person
// has touched, so a half-filled form is kept.
(function () {
  "use strict";
  var every = parseInt(document.body.getAttribute("data-refresh-ms") || "0", 10);
  if (!every || !window.fetch || !window.DOMParser) {
    return;
  }
  var timer = null;
  var busy = false;
  // pressed: a pointer is down; replacing the region under it now would
  // lose the click it is making.
  var pressed = false;

  function touched(region) {
    return region.querySelector("[data-touched]") !== null || region.contains(document.activeElement) &&
      document.activeElement !== document.body && /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName);
  }

  document.addEventListener("pointerdown", function () { pressed = true; }, true);
  document.addEventListener("pointerup", function () { setTimeout(function () { pressed = false; }, 0); }, true);
  document.addEventListener("input", function (e) {
    if (e.target && e.target.setAttribute) {
      e.target.setAttribute("data-touched", "1");
    }
  }, true);

  function schedule() {
    clearTimeout(timer);
    timer = null;
    if (document.visibilityState === "visible") {
      timer = setTimeout(refresh, every);
    }
  }

  function refresh() {
    if (busy || document.visibilityState !== "visible") {
      return schedule();
    }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Console-Refresh": "1" }, cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) {
          return;
        }
        var doc = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-live]").forEach(function (region) {
          var fresh = doc.querySelector('[data-live="' + region.getAttribute("data-live") + '"]');
          if (fresh && !pressed && !touched(region)) {
            region.replaceWith(document.importNode(fresh, true));
          }
        });
        document.body.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        schedule();
      });
  }

  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") {
      refresh();
    } else {
      clearTimeout(timer);
      timer = null;
    }
  });
  schedule();
})();
