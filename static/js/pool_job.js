// Follows a pool job's progress: each stage's state and counts, then reloads the page once the
// job is done or failed, to show what was made or every problem.
(function () {
  "use strict";
  var script = document.getElementById("job-script");
  var url = script.getAttribute("data-url");
  var statusNode = document.getElementById("job-status");
  var delay = 700;
  function show(data) {
    statusNode.textContent = data.status;
    statusNode.setAttribute("data-status", data.status);
    data.stages.forEach(function (stage) {
      var item = document.querySelector('#job-stages li[data-stage="' + stage.stage + '"]');
      if (!item) { return; }
      item.className = "stage " + stage.state;
      item.querySelector(".stage-state").textContent = stage.text;
      var bar = item.querySelector("progress");
      if (stage.state === "running") {
        if (!bar) {
          bar = document.createElement("progress");
          bar.setAttribute("aria-label", stage.title);
          item.appendChild(document.createTextNode(" "));
          item.appendChild(bar);
        }
        if (stage.total) { bar.max = stage.total; bar.value = stage.done; } else { bar.removeAttribute("value"); }
      } else if (bar) {
        bar.remove();
      }
    });
    var waiting = document.getElementById("job-waiting");
    if (waiting && data.status !== "queued") { waiting.remove(); }
  }
  function poll() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (data) {
        if (!data) { delay = Math.min(delay * 2, 10000); return setTimeout(poll, delay); }
        if (data.status === "done" || data.status === "failed") { window.location.reload(); return; }
        show(data);
        delay = Math.min(delay * 1.3, 3000);
        setTimeout(poll, delay);
      })
      .catch(function () { delay = Math.min(delay * 2, 10000); setTimeout(poll, delay); });
  }
  setTimeout(poll, delay);
})();
