// The judging page's keys and saving: a number key chooses that answer for the highlighted
// question and moves on; arrows move between questions; Enter saves; Backspace goes back.
// Saving posts the form (the same POST as without JavaScript) and asks for JSON; while the
// connection is down it keeps the answer on the page and tries again, so nothing is lost.
(function () {
  "use strict";
  var form = document.getElementById("judge-form");
  if (!form) { return; }
  var fields = Array.prototype.slice.call(form.querySelectorAll("fieldset.judge-field"));
  var status = document.getElementById("status");
  var current = 0;
  var saving = false;

  function answered(field) { return !!field.querySelector("input:checked"); }
  function focus(index) {
    if (!fields.length) { return; }
    current = Math.max(0, Math.min(fields.length - 1, index));
    fields.forEach(function (field, i) { field.classList.toggle("current", i === current); });
    var box = fields[current].getBoundingClientRect();
    if (box.top < 0 || box.bottom > window.innerHeight) { fields[current].scrollIntoView({block: "center"}); }
  }
  function firstOpen() {
    for (var i = 0; i < fields.length; i++) { if (!answered(fields[i])) { return i; } }
    return -1;
  }
  function say(text) { if (status) { status.textContent = text; } }

  function save() {
    if (saving) { return; }
    var open = firstOpen();
    if (open >= 0) { focus(open); say("Answer the highlighted question first."); return; }
    saving = true;
    say("Saving…");
    var body = new FormData(form);
    fetch(form.action, {method: "POST", body: body, credentials: "same-origin",
                        headers: {"Accept": "application/json"}})
      .then(function (response) {
        return response.json().then(function (data) { return {ok: response.ok, status: response.status, data: data}; });
      })
      .then(function (answer) {
        if (answer.ok && answer.data.saved) { say("Saved."); window.location.assign(answer.data.next); return; }
        saving = false;
        say("Not saved: " + (answer.data.errors || ["the server refused it (" + answer.status + ")"]).join("; "));
      })
      .catch(function () {
        // A lost connection or a restarting server: keep the answer and try again.
        saving = false;
        say("No connection: your answer is kept on this page and sent again in a few seconds…");
        window.setTimeout(save, 3000);
      });
  }

  fields.forEach(function (field, index) {
    field.addEventListener("change", function (event) {
      var labels = field.querySelectorAll("label.option");
      labels.forEach(function (label) { label.classList.toggle("chosen", label.contains(event.target)); });
      focus(index);
    });
    field.addEventListener("click", function () { focus(index); });
  });
  form.addEventListener("submit", function (event) { event.preventDefault(); save(); });

  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) { return; }
    var target = event.target;
    if (target && (target.tagName === "TEXTAREA" || (target.tagName === "INPUT" && target.type === "text"))) { return; }
    if (/^[1-9]$/.test(event.key) && fields.length) {
      var inputs = fields[current].querySelectorAll("input[type=radio]");
      var choice = inputs[parseInt(event.key, 10) - 1];
      if (!choice) { return; }
      event.preventDefault();
      choice.checked = true;
      choice.dispatchEvent(new Event("change", {bubbles: true}));
      var next = firstOpen();
      if (next < 0 && fields.length === 1) { save(); return; }
      focus(next < 0 ? current : next);
    } else if (event.key === "ArrowDown") { event.preventDefault(); focus(current + 1); }
    else if (event.key === "ArrowUp") { event.preventDefault(); focus(current - 1); }
    else if (event.key === "Enter") { event.preventDefault(); save(); }
    else if (event.key === "Backspace" || event.key === "b") {
      var back = document.getElementById("back");
      if (back) { event.preventDefault(); window.location.assign(back.href); }
    }
  });
  var start = firstOpen();
  focus(start < 0 ? 0 : start);
})();
