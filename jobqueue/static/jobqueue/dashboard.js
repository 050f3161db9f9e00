/* jobqueue dashboard: refresh the figures without reloading the page, and chart hover values.
 *
 * Refresh: #jq-live names how often (data-refresh-seconds; 0 = paused) and where its figures
 * are (data-fragment-url, the page with ?fragment=1). Every period the figures are fetched and
 * swapped in; a hidden tab skips its turn, a failed fetch keeps the last figures and marks them
 * stale, and a fetch sent to the login page (the session ended) reloads the page.
 *
 * Hover: each chart step is a rect.jq-hover whose data-tip names its time and the value of
 * every series; the tooltip (#jq-tooltip) follows the pointer. Served from the app's static
 * files: no CDN, no framework.
 */
(function () {
    "use strict";

    function tooltip() {
        let tip = document.getElementById("jq-tooltip");
        if (!tip) {
            tip = document.createElement("div");
            tip.id = "jq-tooltip";
            tip.setAttribute("role", "tooltip");
            tip.hidden = true;
            document.body.appendChild(tip);
        }
        return tip;
    }

    function band(target) {
        return target && target.closest ? target.closest("rect.jq-hover") : null;
    }

    document.addEventListener("mouseover", function (event) {
        const tip = tooltip();
        document.querySelectorAll("rect.jq-hover-on").forEach(function (r) {
            r.classList.remove("jq-hover-on");
        });
        const over = band(event.target);
        if (!over) {
            tip.hidden = true;
            return;
        }
        over.classList.add("jq-hover-on");
        tip.textContent = over.getAttribute("data-tip");
        tip.hidden = false;
    });

    document.addEventListener("mousemove", function (event) {
        const tip = tooltip();
        if (tip.hidden) {
            return;
        }
        const right = window.scrollX + document.documentElement.clientWidth;
        const left = Math.min(event.pageX + 14, right - tip.offsetWidth - 8);
        tip.style.left = Math.max(left, 0) + "px";
        tip.style.top = event.pageY + 16 + "px";
    });

    function start() {
        const live = document.getElementById("jq-live");
        const seconds = live ? Number(live.getAttribute("data-refresh-seconds") || 0) : 0;
        if (!seconds) {
            return;
        }
        let busy = false;
        async function refresh() {
            if (busy || document.hidden) {
                return;
            }
            busy = true;
            try {
                const response = await fetch(live.getAttribute("data-fragment-url"), {
                    credentials: "same-origin",
                    headers: {"X-Requested-With": "XMLHttpRequest"},
                });
                if (response.redirected) {
                    window.location.reload();
                    return;
                }
                if (!response.ok) {
                    throw new Error("HTTP " + response.status);
                }
                live.innerHTML = await response.text();
                live.classList.remove("jq-stale");
                live.setAttribute("data-refreshes", String(Number(live.getAttribute("data-refreshes") || 0) + 1));
                tooltip().hidden = true;
            } catch (error) {
                live.classList.add("jq-stale");
            } finally {
                busy = false;
            }
        }
        window.setInterval(refresh, seconds * 1000);
    }

    if (document.readyState === "loading") {
        document.addEventListener("DOMContentLoaded", start);
    } else {
        start();
    }
})();
