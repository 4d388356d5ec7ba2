// Live updates of the page's content: the server sends the re-rendered <main> as an
// "update" event (its digest as the event id) when the view changed.
"use strict";

(function () {
  const main = document.getElementById("content");
  const badge = document.getElementById("live-badge");
  if (!main || main.dataset.live !== "1" || !window.EventSource) {
    return;
  }

  function show(state, text) {
    if (badge) {
      badge.dataset.state = state;
      badge.textContent = text;
    }
  }

  let shown = main.dataset.digest || "";
  const source = new EventSource("/live" + (location.pathname === "/" ? "" : location.pathname) + location.search);
  source.addEventListener("open", function () { show("live", "live"); });
  source.addEventListener("error", function () { show("disconnected", "disconnected"); });
  source.addEventListener("update", function (event) {
    show("live", "live");
    if (event.lastEventId === shown) {
      return;
    }
    shown = event.lastEventId;
    main.innerHTML = event.data;
    main.dataset.digest = shown;
  });
  source.addEventListener("problem", function (event) {
    show("disconnected", event.data);
  });
})();
