// Follows a run's status until it is done or failed, then reloads the page to show the scores.
(function () {
  "use strict";
  var script = document.getElementById("run-script");
  var url = script.getAttribute("data-url");
  var statusNode = document.getElementById("run-status");
  var waitNode = document.getElementById("run-wait");
  var delay = 500;
  function poll() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (data) {
        if (!data) { delay = Math.min(delay * 2, 10000); return setTimeout(poll, delay); }
        statusNode.textContent = data.status;
        statusNode.setAttribute("data-status", data.status);
        if (waitNode && data.status === "scoring") {
          waitNode.textContent = "Being scored now. This page updates itself once the scores are stored.";
        }
        if (data.status === "done" || data.status === "failed") { window.location.reload(); return; }
        delay = Math.min(delay * 1.5, 5000);
        setTimeout(poll, delay);
      })
      .catch(function () { delay = Math.min(delay * 2, 10000); setTimeout(poll, delay); });
  }
  setTimeout(poll, delay);
})();
