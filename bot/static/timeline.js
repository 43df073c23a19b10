// The run page's live timeline: append the entries the server streams (bot/console/events.py), and
// swap in the status badge and the "Waiting for" section when they change. The server renders
// and escapes every fragment; this only places them. Without JavaScript the page still shows
// the run as it was when loaded.
(function () {
  "use strict";
  var list = document.getElementById("timeline");
  if (!list || !list.dataset.events || !window.EventSource) {
    return;
  }
  var note = document.getElementById("live-note");
  var source = new EventSource(list.dataset.events);
  source.addEventListener("item", function (event) {
    if (!document.getElementById("seq-" + event.lastEventId)) {
      list.insertAdjacentHTML("beforeend", event.data);
    }
  });
  source.addEventListener("replace", function (event) {
    var box = document.createElement("template");
    box.innerHTML = event.data;
    var fresh = box.content.firstElementChild;
    var old = fresh && fresh.id ? document.getElementById(fresh.id) : null;
    if (old) {
      old.replaceWith(fresh);
    }
  });
  source.addEventListener("end", function () {
    source.close();
    if (note) {
      note.textContent = "The run has ended.";
    }
  });
})();
