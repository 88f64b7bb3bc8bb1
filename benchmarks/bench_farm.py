"""The board farm under load: N jobs from C concurrent clients on 4 emulated boards.

Real pieces on loopback (``tests/farmkit.py``): a labgrid coordinator, the farm service and
two agents in separate processes, each serving two emulated mps2-an386 boards (QEMU).
Every client uploads the same export (stored once), submits its share of the jobs by
target, then polls their status until all are done, timing every status request.

Printed (figures, never asserted on time):
  * jobs done / lost / run more than once, and whether every output equals a local deploy's;
  * board utilisation while jobs wait (busy board-seconds over 4 x the waiting window);
  * status request latency p50 / p99 under that load;
  * farm overhead per job: submit-to-done minus the agent's deploy time for a job alone
    (uncontended), and under load the board-side overhead (board held minus deploy time);
  * the same submit-to-done minus deploy under load (queue wait included), for reference.

Run: ``python benchmarks/bench_farm.py [--jobs 200] [--clients 20]`` (about 5-10 minutes
for the defaults on 2 cores). Exit status 1 if a job is lost, duplicated or wrong.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np

import aidge_deploy
from aidge_deploy.config import DeployConfig
from aidge_deploy.farm.archive import pack_export
from aidge_deploy.farm.client import FarmClient
from common import make_export  # also puts tests/ on sys.path
from farmkit import ALICE, Farm, make_farm

BOARDS_A = {"an386-1": "mps2-an386", "an386-2": "mps2-an386"}
BOARDS_B = {"an386-3": "mps2-an386", "an386-4": "mps2-an386"}


def percentile(values: list[float], q: float) -> float:
    data = sorted(values)
    return data[min(len(data) - 1, max(0, int(np.ceil(q * len(data))) - 1))]


def client_worker(
    farm: Farm,
    archive: bytes,
    n_jobs: int,
    latencies: list[float],
    ids: list[int],
    lock: threading.Lock,
) -> None:
    with FarmClient(farm.url) as c:
        c.login(*ALICE)
        export = c.upload_export(archive, name="tiny_cnn")
        mine = [
            int(c.submit(export["id"], board=None, target="mps2-an386", config={})["id"])
            for _ in range(n_jobs)
        ]
        with lock:
            ids.extend(mine)
        pending = set(mine)
        while pending:
            for job_id in list(pending):
                t0 = time.perf_counter()
                job = c.job(job_id)
                dt = time.perf_counter() - t0
                with lock:
                    latencies.append(dt)
                if job["state"] in ("done", "failed", "cancelled"):
                    pending.discard(job_id)
            time.sleep(0.2)


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
                while (view := c.job(job["id"]))["state"] not in ("done", "failed"):
                    time.sleep(0.05)
                alone = (view["times"]["done"] - view["times"]["queued"]) - view["deploy_seconds"]
                alone_total = time.time() - t0
        latencies: list[float] = []
        ids: list[int] = []
        lock = threading.Lock()
        share = [
            args.jobs // args.clients + (1 if i < args.jobs % args.clients else 0)
            for i in range(args.clients)
        ]
        started = time.time()
        threads = [
            threading.Thread(target=client_worker, args=(farm, archive, n, latencies, ids, lock))
            for n in share
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.time() - started
        with FarmClient(farm.url) as c:
            c.login(*ALICE)
            jobs = [c.job(i) for i in ids]
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
    print(f"\n== board farm: {args.jobs} jobs, {args.clients} clients, 4 emulated boards ==")
    print(f"  jobs done                       {len(done)} / {args.jobs}")
    print(f"  lost                            {lost}")
    print(f"  run more than once              {dup}")
    print(f"  outputs different from local    {wrong}")
    print(f"  wall time                       {wall:8.1f} s  ({len(done) / wall:.2f} jobs/s)")
    print(f"  agent deploy time per job       median {statistics.median(deploy_s):6.2f} s")
    print(f"  board utilisation while waiting {util * 100:8.1f} %  (target >= 90 %)")
    print(
        f"  status request latency          p50 {percentile(latencies, 0.5) * 1000:6.1f} ms   "
        f"p99 {percentile(latencies, 0.99) * 1000:6.1f} ms  (target p99 < 50 ms; {len(latencies)} requests)"
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
    return 1 if lost or dup or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
