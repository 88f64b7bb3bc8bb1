"""The board farm under load: N jobs from C concurrent clients on 4 emulated boards.

Real pieces on loopback (``tests/farmkit.py``): a labgrid coordinator, the farm service and
two agents in separate processes, each serving two emulated mps2-an386 boards (QEMU).
Every client uploads the same export (stored once), submits its share of the jobs by
target, then polls their status until all are done, timing every status request.

Printed (figures, never asserted on time):
  * jobs done / lost / run more than once, and whether every output equals a local deploy's;
  * board utilisation while jobs wait (busy board-seconds over 4 x the waiting window);
  * status request latency p50 / p99 under that load, as the clients saw it and as the
    service spent on it (its ``Server-Timing`` header);
  * farm overhead per job: submit-to-done minus the agent's deploy time for a job alone
    (uncontended), and under load the board-side overhead (board held minus deploy time);
  * where a job's time goes, phase by phase (alone and under load): queue wait,
    reservation to lock (the agent's poll and labgrid's lock), claim, fetching the export,
    handing it to the board's warm runner, the deploy, the runner's exit, uploading the
    results, the end report, and the done-notification reaching the client;
  * the same submit-to-done minus deploy under load (queue wait included), for reference.

Run: ``python benchmarks/bench_farm.py [--jobs 200] [--clients 20]`` (about 5-10 minutes
for the defaults on 2 cores). Exit status 1 if a job is lost, duplicated or wrong.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

import aidge_deploy
from aidge_deploy.config import DeployConfig
from aidge_deploy.farm.archive import pack_export
from aidge_deploy.farm.client import FarmClient
from common import make_export  # also puts tests/ on sys.path
from farmkit import ALICE, Farm, make_farm

BOARDS_A = {"an386-1": "mps2-an386", "an386-2": "mps2-an386"}
BOARDS_B = {"an386-3": "mps2-an386", "an386-4": "mps2-an386"}
TERMINAL = ("done", "failed", "cancelled")
#: the agent's phases after its claim, in order (``JobRun.phases``)
BOARD_PHASES = ("fetch", "start", "deploy", "exit", "upload")


def percentile(values: list[float], q: float) -> float:
    data = sorted(values)
    return data[min(len(data) - 1, max(0, int(np.ceil(q * len(data))) - 1))]


def server_ms(response: Any) -> float | None:
    """The service's own time on a request, from its ``Server-Timing: app;dur=MS``."""
    for part in response.headers.get("server-timing", "").split(","):
        name, _, params = part.strip().partition(";")
        if name == "app" and params.startswith("dur="):
            return float(params[4:])
    return None


class Load:
    """What the clients measured, shared between their threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.server: list[float] = []
        self.ids: list[int] = []
        self.seen_done: dict[int, float] = {}


def status(c: FarmClient, job_id: int, load: Load) -> dict[str, Any]:
    t0 = time.perf_counter()
    r = c.request("GET", f"/jobs/{job_id}")
    dt = time.perf_counter() - t0
    spent = server_ms(r)
    with load.lock:
        load.latencies.append(dt)
        if spent is not None:
            load.server.append(spent / 1000)
    view: dict[str, Any] = r.json()
    return view


def client_worker(farm: Farm, archive: bytes, n_jobs: int, load: Load) -> None:
    with FarmClient(farm.url) as c:
        c.login(*ALICE)
        export = c.upload_export(archive, name="tiny_cnn")
        mine = [
            int(c.submit(export["id"], board=None, target="mps2-an386", config={})["id"])
            for _ in range(n_jobs)
        ]
        with load.lock:
            load.ids.extend(mine)
        pending = set(mine)
        while pending:
            for job_id in list(pending):
                job = status(c, job_id, load)
                if job["state"] in TERMINAL:
                    with load.lock:
                        load.seen_done[job_id] = time.time()
                    pending.discard(job_id)
            time.sleep(0.2)


def phases(job: dict[str, Any], seen: float | None) -> dict[str, float]:
    """Seconds of each phase of a finished job (service times, agent phases, client)."""
    t = job["times"]
    agent = job.get("phases") or {}
    out = {
        "queue wait": t["reserved"] - t["queued"],
        "reservation to lock": agent.get("lock", float("nan")),
        "claim": agent.get("claim", float("nan")),
    }
    out["reserved to claimed"] = t["building"] - t["reserved"]
    for name in BOARD_PHASES:
        out[name] = agent.get(name, float("nan"))
    end = t.get("done") or t.get("failed") or t.get("cancelled")
    out["end report"] = (end - t["building"]) - sum(agent.get(n, 0.0) for n in BOARD_PHASES)
    out["done to client"] = (seen - end) if seen is not None else float("nan")
    return out


def board_gaps(done: list[dict[str, Any]]) -> list[float]:
    """Per board, from each job's end to the claim of the board's next job."""
    by_board: dict[str, list[dict[str, Any]]] = {}
    for j in done:
        by_board.setdefault(j["board"], []).append(j)
    gaps = []
    for jobs in by_board.values():
        jobs.sort(key=lambda j: j["times"]["building"])
        for a, b in itertools.pairwise(jobs):
            gaps.append(b["times"]["building"] - a["times"]["done"])
    return gaps


def print_phases(alone: dict[str, float], loaded: list[dict[str, float]]) -> None:
    labels = {
        "queue wait": "queue wait (queued to reserved)",
        "reserved to claimed": "reserved to claimed (service)",
        "reservation to lock": "  offer to labgrid lock (agent)",
        "claim": "  claim request (agent)",
        "fetch": "fetch export",
        "start": "hand to the warm runner",
        "deploy": "deploy (the agent's deploy())",
        "exit": "runner exit, last events",
        "upload": "upload log, bundle, result",
        "end report": "end report (finish request)",
        "done to client": "done to the client seeing it",
    }
    print("  where a job's time goes          alone      under load: median    p90")
    for key, label in labels.items():
        values = [p[key] for p in loaded if not np.isnan(p[key])]
        med = statistics.median(values) if values else float("nan")
        p90 = percentile(values, 0.9) if values else float("nan")
        print(f"    {label:<32} {alone[key]:7.3f} s        {med:7.3f} s  {p90:7.3f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--clients", type=int, default=20)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-farm-"))
    export = make_export(tmp, kind="output", target="mps2-an386")
    local = aidge_deploy.deploy(export, DeployConfig())
    assert isinstance(local.output, list)
    archive = pack_export(Path(export.path))
    farm = make_farm(tmp / "farm", agent_timeout=30.0)
    load = Load()
    try:
        farm.start_agent("host-a", BOARDS_A)
        farm.start_agent("host-b", BOARDS_B)
        # one job alone: the farm's overhead without any queue (first run builds: warm up)
        with FarmClient(farm.url) as c:
            c.login(*ALICE)
            up = c.upload_export(archive)
            for _ in range(2):
                t0 = time.time()
                job = c.submit(up["id"], board="an386-1", target=None, config={})
                while (view := c.job(job["id"]))["state"] not in TERMINAL:
                    time.sleep(0.05)
                seen = time.time()
                alone = (view["times"]["done"] - view["times"]["queued"]) - view["deploy_seconds"]
                alone_total = seen - t0
                alone_phases = phases(view, seen)
        threads = [
            threading.Thread(target=client_worker, args=(farm, archive, n, load))
            for n in [
                args.jobs // args.clients + (1 if i < args.jobs % args.clients else 0)
                for i in range(args.clients)
            ]
        ]
        started = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.time() - started
        with FarmClient(farm.url) as c:
            c.login(*ALICE)
            jobs = [c.job(i) for i in load.ids]
            dup = 0
            wrong = 0
            for j in jobs:
                events = c.events(j["id"])["events"]
                states = Counter(e["state"] for e in events if e["kind"] == "state")
                if states["done"] > 1 or states["building"] > 1:
                    dup += 1
                if j["state"] == "done":
                    from aidge_deploy.farm.resultcodec import decode_result

                    remote = decode_result(c.result(j["id"]))
                    assert isinstance(remote.output, list)
                    if not all(
                        np.array_equal(r, lo)
                        for r, lo in zip(remote.output, local.output, strict=True)
                    ):
                        wrong += 1
    finally:
        farm.stop_all()
    done = [j for j in jobs if j["state"] == "done"]
    lost = args.jobs - len(done)
    # utilisation while jobs wait: from the first claim to the last claim
    starts = sorted(j["times"]["building"] for j in done)
    w0, w1 = starts[0], starts[-1]
    busy = 0.0
    for j in done:
        a, b = j["times"]["building"], j["times"]["done"]
        busy += max(0.0, min(b, w1) - max(a, w0))
    util = busy / (4 * (w1 - w0)) if w1 > w0 else float("nan")
    held = [(j["times"]["done"] - j["times"]["reserved"]) - j["deploy_seconds"] for j in done]
    total = [(j["times"]["done"] - j["times"]["queued"]) - j["deploy_seconds"] for j in done]
    deploy_s = [j["deploy_seconds"] for j in done]
    lat, srv = load.latencies, load.server
    print(f"\n== board farm: {args.jobs} jobs, {args.clients} clients, 4 emulated boards ==")
    print(f"  load average (1, 5, 15 min)     {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"  jobs done                       {len(done)} / {args.jobs}")
    print(f"  lost                            {lost}")
    for j in jobs:
        if j["state"] != "done":
            print(f"    job {j['id']} {j['state']}: {(j.get('error') or {}).get('message')}")
    print(f"  run more than once              {dup}")
    print(f"  outputs different from local    {wrong}")
    print(f"  wall time                       {wall:8.1f} s  ({len(done) / wall:.2f} jobs/s)")
    print(f"  agent deploy time per job       median {statistics.median(deploy_s):6.2f} s")
    print(f"  board utilisation while waiting {util * 100:8.1f} %  (target >= 90 %)")
    gaps = board_gaps(done)
    if gaps:
        print(
            f"    board idle between two jobs   median {statistics.median(gaps):6.3f} s  "
            f"p90 {percentile(gaps, 0.9):6.3f} s  (one job's done to the next one's claim)"
        )
    print(
        f"  status request latency          p50 {percentile(lat, 0.5) * 1000:6.1f} ms   "
        f"p99 {percentile(lat, 0.99) * 1000:6.1f} ms  (target p99 < 50 ms; {len(lat)} requests)"
    )
    if srv:
        print(
            f"    of which in the service       p50 {percentile(srv, 0.5) * 1000:6.1f} ms   "
            f"p99 {percentile(srv, 0.99) * 1000:6.1f} ms  (Server-Timing)"
        )
    print(
        f"  farm overhead, job alone        {alone:6.2f} s  (submit to done minus deploy; client saw {alone_total:.2f} s)"
    )
    print(
        f"  farm overhead under load        median {statistics.median(held):6.2f} s  p90 {percentile(held, 0.9):6.2f} s  (board held minus deploy)"
    )
    print(
        f"  submit to done minus deploy     median {statistics.median(total):6.2f} s  (queue wait included)"
    )
    print_phases(alone_phases, [phases(j, load.seen_done.get(j["id"])) for j in done])
    return 1 if lost or dup or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
