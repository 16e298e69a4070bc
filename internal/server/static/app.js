// Progressive enhancement only: every action works without this file.
// "select all on this page" toggles the row checkboxes; run pages poll.
document.addEventListener("DOMContentLoaded", function () {
  var all = document.getElementById("select-page");
  if (all) {
    all.addEventListener("change", function () {
      document.querySelectorAll("input[name=id]").forEach(function (c) { c.checked = all.checked; });
    });
  }
});
