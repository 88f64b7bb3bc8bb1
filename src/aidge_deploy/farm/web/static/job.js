// The job page, live: long-polls /jobs/<id>/progress for new events, the stages and the
// log as it grows (its tail, whenever the agent sent a new one); when the job ends, reloads once to show its result. Text goes in with
// textContent only.
"use strict";
(function () {
  const root = document.getElementById("job");
  if (!root || root.dataset.terminal === "yes") return;
  const id = root.dataset.job;
  let after = Number(root.dataset.lastEvent) || 0;
  let logVersion = root.dataset.logVersion || "";
  const badge = document.getElementById("job-state");
  const stages = document.getElementById("stages");
  const events = document.getElementById("events");
  const log = document.getElementById("log");
  const note = document.getElementById("log-note");

  function when(ts) {
    return new Date(ts * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
  }
  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function show(data) {
    const job = data.job;
    badge.textContent = job.state;
    badge.dataset.state = job.state;
    badge.className = "badge big state-" + job.state;
    const board = document.getElementById("job-board");
    if (job.board) board.textContent = job.board;
    const agent = document.getElementById("job-agent");
    if (job.agent) agent.textContent = job.agent;
    const started = job.times.building;
    if (started) document.getElementById("job-started").textContent = when(started);
    const queue = document.getElementById("queue-position");
    if (queue && job.queue_position !== undefined) queue.textContent = job.queue_position + " job(s) ahead in the queue";
    const items = [];
    for (const st of data.stages) {
      const li = el("li");
      li.dataset.stage = st.name;
      li.dataset.status = st.status;
      li.append(el("span", null, "dot"), el("span", st.name, "sname"), " ", el("small", st.message, "smsg"));
      items.push(li);
    }
    stages.replaceChildren(...items);
    for (const ev of data.events) {
      const li = el("li");
      li.dataset.event = ev.id;
      li.append(el("small", when(ev.at), "muted"), " ");
      if (ev.kind === "state") li.append(el("b", ev.state));
      else li.append(ev.stage || ev.kind);
      li.append(" " + (ev.message || ""));
      events.append(li);
      after = Math.max(after, ev.id);
    }
    if (data.log) {
      const stick = log.scrollTop + log.clientHeight >= log.scrollHeight - 8;
      log.textContent = data.log.text;
      if (stick) log.scrollTop = log.scrollHeight;
      document.getElementById("log-cut").hidden = !data.log.truncated;
      note.textContent = "";
      logVersion = data.log.version;
      root.dataset.logVersion = logVersion;
    }
    root.dataset.lastEvent = String(after);
  }
  async function poll() {
    let delay = 0;
    try {
      const url = "/jobs/" + encodeURIComponent(id) + "/progress?after=" + after + "&log=" + encodeURIComponent(logVersion) + "&wait=20";
      const r = await fetch(url, { credentials: "same-origin", cache: "no-store" });
      if (!r.ok || !(r.headers.get("content-type") || "").includes("json")) {
        if (r.status === 401 || r.redirected) { location.reload(); return; }
        throw new Error("HTTP " + r.status);
      }
      const data = await r.json();
      show(data);
      if (data.terminal) { location.reload(); return; }
    } catch (e) {
      note.textContent = "connection lost, retrying… (" + e.message + ")";
      delay = 2000;
    }
    setTimeout(poll, delay);
  }
  poll();
})();
