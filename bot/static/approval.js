// The approval page's countdown: "Expires in ..." counts down live, and at expiry the card's
// buttons are disabled and the page says the request expired. It counts from the server's
// clock (data-now), not the browser's, so a browser whose clock is off still agrees with the
// server; the server refuses a late decision anyway. Words as engine.timeline.minutes_text.
// The live stream (live.js) may replace the countdown (a vote came in) or remove it (the
// request was decided elsewhere): each tick reads the one on the page, and none stops it.
(function () {
  "use strict";
  var timer = null;
  var counted = null; // the countdown element being counted, and when it was first seen
  var started = 0;

  function minutesText(minutes) {
    var days = Math.floor(minutes / 1440);
    var hours = Math.floor((minutes % 1440) / 60);
    var mins = minutes % 60;
    var parts = [];
    if (days) {
      parts.push(days + " d");
    }
    if (hours) {
      parts.push(hours + " h");
    }
    if (mins || !parts.length) {
      parts.push(mins + " min");
    }
    return parts.join(" ");
  }

  function expire(box) {
    window.clearInterval(timer);
    box.textContent = "This request expired before anyone decided it.";
    box.className = "countdown note note--bad";
    box.setAttribute("role", "status");
    var buttons = document.querySelectorAll(".signoff-card__form button, .signoff-card__form textarea");
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].disabled = true;
    }
  }

  function tick() {
    var box = document.getElementById("countdown");
    if (!box) {
      window.clearInterval(timer); // decided or expired: the page says so instead
      return;
    }
    if (box !== counted) {
      counted = box;
      started = Date.now();
    }
    var remaining = Date.parse(box.dataset.expiresAt) - Date.parse(box.dataset.now);
    var ms = remaining - (Date.now() - started);
    if (ms <= 0) {
      expire(box);
      return;
    }
    document.getElementById("countdown-left").textContent = minutesText(Math.ceil(ms / 60000));
  }

  if (document.getElementById("countdown")) {
    timer = window.setInterval(tick, 1000);
    tick();
  }
})();
