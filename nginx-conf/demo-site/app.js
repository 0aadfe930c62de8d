// Marks the page as fully loaded: the stylesheet, the logo and this script all arrived.
document.addEventListener("DOMContentLoaded", function () {
  var el = document.getElementById("status");
  var css = getComputedStyle(document.body).backgroundColor !== "rgba(0, 0, 0, 0)";
  var img = document.querySelector("header img");
  var done = function () {
    var ok = css && img.complete && img.naturalWidth > 0;
    el.textContent = ok ? "All assets loaded." : "Some assets are missing.";
    el.className = ok ? "ok" : "";
    document.body.dataset.assets = ok ? "ok" : "missing";
  };
  if (img.complete) { done(); } else { img.addEventListener("load", done); img.addEventListener("error", done); }
});
