// Pages that follow something live (bot/console/streams.py): the run page's timeline, the
// console's queue and the approval page. The element with data-events names the stream; the
// server renders and escapes every fragment, this only places them:
//   item     appended to that element (the run page's timeline), once per id;
//   replace  swapped for the element with the fragment's own id (a reason being typed in the
//            old one is kept);
//   end      the stream is closed and #live-note says so (data-ended).
// A #live-note hidden until then is shown once the stream is open (it says the page follows).
// Without JavaScript the pages still show what was true when they loaded.
(function () {
  "use strict";
  var box = document.querySelector("[data-events]");
  if (!box || !window.EventSource) {
    return;
  }
  var note = document.getElementById("live-note");
  var source = new EventSource(box.dataset.events);

  function keepTyped(old, fresh) {
    var typed = old.querySelectorAll("textarea");
    for (var i = 0; i < typed.length; i++) {
      var twin = typed[i].id ? fresh.querySelector("#" + CSS.escape(typed[i].id)) : null;
      if (twin && typed[i].value) {
        twin.value = typed[i].value;
      }
    }
  }

  source.addEventListener("open", function () {
    if (note) {
      note.hidden = false;
    }
  });
  source.addEventListener("item", function (event) {
    if (!document.getElementById("seq-" + event.lastEventId)) {
      box.insertAdjacentHTML("beforeend", event.data);
    }
  });
  source.addEventListener("replace", function (event) {
    var holder = document.createElement("template");
    holder.innerHTML = event.data;
    var fresh = holder.content.firstElementChild;
    var old = fresh && fresh.id ? document.getElementById(fresh.id) : null;
    if (old) {
      keepTyped(old, fresh);
      old.replaceWith(fresh);
    }
  });
  source.addEventListener("end", function () {
    source.close();
    if (note && note.dataset.ended) {
      note.textContent = note.dataset.ended;
    }
  });
})();
