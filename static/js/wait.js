// Follows something the page is waiting for (a board's statistics): polls the JSON status URL of
// the script element (``{"waiting": bool, "message": str}``), writes the message into the element
// named by data-message, and reloads the page once nothing is waited for any more. Without
// JavaScript the page's <noscript> refresh does the same, less smoothly.
(function () {
  "use strict";
  var script = document.getElementById("wait-script");
  if (!script) { return; }
  var url = script.getAttribute("data-url");
  var node = document.getElementById(script.getAttribute("data-message"));
  var delay = 1000;
  function poll() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (data) {
        if (!data) { delay = Math.min(delay * 2, 15000); return setTimeout(poll, delay); }
        if (!data.waiting) { window.location.reload(); return; }
        if (node && data.message) { node.textContent = data.message; }
        delay = Math.min(delay * 1.5, 5000);
        setTimeout(poll, delay);
      })
      .catch(function () { delay = Math.min(delay * 2, 15000); setTimeout(poll, delay); });
  }
  setTimeout(poll, delay);
})();
