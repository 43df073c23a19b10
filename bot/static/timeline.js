// The run page's live timeline: append the entries the server streams (bot/web/events.py).
// The server renders and escapes each entry; this only places it. Without JavaScript the page
// still shows the timeline as it was when loaded.
(function () {
  "use strict";
  var list = document.getElementById("timeline");
  if (!list || !list.dataset.events || !window.EventSource) {
    return;
  }
  var status = document.getElementById("run-status");
  var note = document.getElementById("live-note");
  var source = new EventSource(list.dataset.events);
  source.addEventListener("item", function (event) {
    if (!document.getElementById("seq-" + event.lastEventId)) {
      list.insertAdjacentHTML("beforeend", event.data);
    }
  });
  source.addEventListener("status", function (event) {
    status.textContent = event.data;
    status.className = "status status--" + event.data;
  });
  source.addEventListener("end", function () {
    source.close();
    if (note) {
      note.textContent = "The run has ended.";
    }
  });
})();
