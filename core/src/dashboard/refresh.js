(function () {
  var key = "proxops-scroll:" + location.pathname + location.search;
  var y = sessionStorage.getItem(key);
  if (y !== null) {
    sessionStorage.removeItem(key);
    window.scrollTo(0, Number(y));
  }
  var every = Number(document.documentElement.getAttribute("data-refresh")) * 1000;
  function reload() {
    var a = document.activeElement;
    if (a && (a.tagName === "SELECT" || a.tagName === "INPUT")) {
      setTimeout(reload, 5000);
      return;
    }
    sessionStorage.setItem(key, String(window.scrollY));
    location.reload();
  }
  if (every > 0) {
    setTimeout(reload, every);
  }
})();
