// pail dashboard: refresh the live regions of this page in place, no framework.
// Each [data-live][id] element is replaced by its fresh copy from the server,
// except one holding keyboard focus (it updates once focus leaves), so that
// refreshing never moves a keyboard user. Pauses while the tab is hidden.
"use strict";
(() => {
  const body = document.body;
  const seconds = Number(body.dataset.refresh);
  if (!Number.isFinite(seconds) || seconds <= 0) return;
  const pause = document.getElementById("pause");
  const state = document.getElementById("refresh-state");
  let paused = false;
  let timer = null;
  let busy = false;

  function schedule() {
    clearTimeout(timer);
    if (!paused) timer = setTimeout(refresh, seconds * 1000);
  }

  async function refresh() {
    if (busy || paused || document.visibilityState !== "visible") return;
    busy = true;
    try {
      const response = await fetch(location.href, { credentials: "same-origin", cache: "no-store" });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      for (const region of fresh.querySelectorAll("[data-live][id]")) {
        const current = document.getElementById(region.id);
        if (!current || current.contains(document.activeElement)) continue;
        if (current.innerHTML !== region.innerHTML) current.innerHTML = region.innerHTML;
      }
      body.dataset.refreshed = String(Number(body.dataset.refreshed || 0) + 1);
      if (state) state.textContent = "";
    } catch (error) {
      if (state) state.textContent = `Refresh failed (${error.message}); trying again.`;
    } finally {
      busy = false;
      schedule();
    }
  }

  if (pause) {
    pause.addEventListener("click", () => {
      paused = !paused;
      pause.setAttribute("aria-pressed", String(paused));
      pause.textContent = paused ? "Resume refresh" : "Pause refresh";
      if (!paused) refresh();
    });
  }
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") refresh();
  });
  schedule();
})();
