// The approval page's countdown: "Expires in ..." counts down live, and at expiry the card's
// buttons are disabled and the page says the request expired. It counts from the server's
// clock (data-now), not the browser's, so a browser whose clock is off still agrees with the
// server; the server refuses a late decision anyway. Words as engine.timeline.minutes_text.
(function () {
  "use strict";
  var box = document.getElementById("countdown");
  if (!box) {
    return;
  }
  var left = document.getElementById("countdown-left");
  var remaining = Date.parse(box.dataset.expiresAt) - Date.parse(box.dataset.now);
  var started = Date.now();
  var timer = null;

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

  function expire() {
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
    var ms = remaining - (Date.now() - started);
    if (ms <= 0) {
      expire();
      return;
    }
    left.textContent = minutesText(Math.ceil(ms / 60000));
  }

  timer = window.setInterval(tick, 1000);
  tick();
})();
