// The boards page, live: re-reads /boards/data and redraws the rows. Text goes in with
// textContent only, so a board or user name is always shown, never run.
"use strict";
(function () {
  const table = document.getElementById("boards");
  const updated = document.getElementById("updated");
  const live = document.getElementById("live");
  if (!table || !live) return;
  const every = Number(live.dataset.refreshMs) || 1500;

  function when(ts) {
    if (ts === null || ts === undefined) return "—";
    return new Date(ts * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
  }
  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function stateText(b) {
    let t = b.state;
    if (b.state === "busy") t = "busy — job #" + b.job + " (" + b.job_user + ")";
    else if (b.state === "offline") t = "offline" + (b.offline_since ? " since " + when(b.offline_since) : "");
    else if (b.state === "drained") t = "drained" + (b.drain_reason ? " — " + b.drain_reason : " (maintenance)");
    else if (b.state === "held") t = b.held;
    if (b.drained && b.state !== "drained") t += " · drained" + (b.drain_reason ? " — " + b.drain_reason : "");
    return t;
  }
  function row(b) {
    const tr = document.createElement("tr");
    tr.dataset.board = b.name;
    tr.dataset.state = b.state;
    tr.dataset.queue = b.queue;
    tr.dataset.job = b.job === null ? "" : b.job;
    tr.dataset.healthDone = b.health.done;
    tr.dataset.healthFailed = b.health.failed;
    const name = el("td", b.name, "name");
    if (b.kind === "emu") { name.append(" "); name.append(el("small", "emulated", "muted")); }
    tr.append(name, el("td", b.target), el("td", b.host));
    const st = el("td");
    st.append(el("span", stateText(b), "badge state-" + b.state));
    if (b.drain_run) {
      const why = el("a", "log", "drain-log");
      why.href = "/boards/" + encodeURIComponent(b.name) + "/health/" +
        encodeURIComponent(b.drain_run) + "/log";
      st.append(" ", why);
    }
    tr.append(st, el("td", b.queue, "num"));
    const last = el("td", null, "last");
    if (b.last) {
      last.append(el("span", b.last.state, "badge state-" + b.last.state), " ");
      if (b.last.mine) {
        const a = el("a", "job #" + b.last.job);
        a.href = "/jobs/" + encodeURIComponent(b.last.job);
        last.append(a);
      } else last.append("job #" + b.last.job);
      last.append(" ", el("small", when(b.last.at), "muted"));
    } else last.append(el("span", "no job yet", "muted"));
    tr.append(last);
    const h = b.health.done + b.health.failed;
    tr.append(h ? el("td", b.health.done + " passed, " + b.health.failed + " failed", "health")
                : el("td", "—", "health muted"));
    const check = el("td", null, "check");
    const path = "/boards/" + encodeURIComponent(b.name) + "/health";
    if (b.check) {
      check.append(el("span", b.check.outcome, "badge state-" + b.check.badge), " ",
                   el("small", when(b.check.at), "muted"));
      if (b.check.outcome !== "pending") {
        const log = el("a", "log", "health-log");
        log.href = path + "/" + encodeURIComponent(b.check.run) + "/log";
        check.append(" ", log);
      }
      check.append(" · ");
    }
    const hist = el("a", "history", "health-history");
    hist.href = path;
    check.append(hist);
    tr.append(check);
    return tr;
  }
  async function refresh() {
    try {
      const r = await fetch("/boards/data", { credentials: "same-origin", cache: "no-store" });
      if (!r.ok || !(r.headers.get("content-type") || "").includes("json")) {
        if (r.status === 401 || r.redirected) { location.reload(); return; }
        throw new Error("HTTP " + r.status);
      }
      const data = await r.json();
      const body = document.createElement("tbody");
      for (const b of data.boards) body.append(row(b));
      if (!data.boards.length) {
        const tr = el("tr", null, "empty");
        const td = el("td", "No board yet.", "muted");
        td.colSpan = 8;
        tr.append(td);
        body.append(tr);
      }
      table.tBodies[0].replaceWith(body);
      updated.textContent = "updated " + new Date().toLocaleTimeString() +
        (data.coordinator ? "" : " — the labgrid coordinator is unreachable");
      live.dataset.updates = String(Number(live.dataset.updates || 0) + 1);
    } catch (e) {
      updated.textContent = "connection lost, retrying… (" + e.message + ")";
    }
    setTimeout(refresh, every);
  }
  setTimeout(refresh, every);
})();
