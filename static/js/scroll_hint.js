// Says so above a table wider than its box, which scrolls sideways: the box's scrollbar sits at
// the bottom of a long table, out of sight, and phones show none until touched (issue 30: "show
// all measures", the per-act nugget table and compare's last column looked cut off). Without
// JavaScript the tables scroll all the same; the hint is an addition, never the only way.
(function () {
  "use strict";
  var TEXT = "Wider than the page: scroll the table sideways (\u2192) to see every column.";
  function mark() {
    var boxes = document.querySelectorAll(".scroll");
    for (var i = 0; i < boxes.length; i++) {
      var box = boxes[i];
      var wide = box.offsetParent !== null && box.scrollWidth > box.clientWidth + 1;
      var hint = box.previousElementSibling;
      var has = hint !== null && hint.classList.contains("scroll-hint");
      if (wide && !has) {
        hint = document.createElement("p");
        hint.className = "scroll-hint";
        hint.textContent = TEXT;
        box.parentNode.insertBefore(hint, box);
      } else if (!wide && has) {
        hint.parentNode.removeChild(hint);
      }
      box.classList.toggle("overflowing", wide);
    }
  }
  mark();
  window.addEventListener("resize", mark);
  document.addEventListener("toggle", mark, true);  // a <details> opened: its tables now have a width
})();
