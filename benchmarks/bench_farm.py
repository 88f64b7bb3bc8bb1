"""The board farm under load: N jobs from C concurrent clients on 4 emulated boards.

Real pieces on loopback (``tests/farmkit.py``): a labgrid coordinator, the farm service and
two agents in separate processes, each serving two emulated mps2-an386 boards (QEMU).
Every client uploads the same export (stored once), submits its share of the jobs by
target, then polls their status until all are done (each of its jobs in turn, then ``--pause``
seconds of rest), timing every status request. Each client is a process of its own, as a
user's script or a CI job is (in threads of one process, the clients' own GIL queueing
would be counted as the service's latency). Everything shares the machine's CPUs, as in a
one-machine farm (``farm up``); the agents run their jobs (runner, build, QEMU) at their
default ``--job-nice`` (``--job-nice 0``: at the service's priority).

Printed (figures, never asserted on time), each goal of issue 10 next to its target:
  * jobs done / lost / run more than once, and whether every output equals a local deploy's;
  * board utilisation while jobs wait: board-seconds held by a job (from its claim to the
    unlock that frees the board; results are uploaded after it) over 4 x the window in
    which jobs waited, and the idle time between two jobs of a board, split in unlock to
    the next reservation (labgrid and the service) and reservation to claim (the agent);
  * status request latency p50 / p90 / p99 under that load, as the clients saw it and as
    the service spent on it (its ``Server-Timing`` header), and the request rate;
  * farm overhead per job: submit-to-done minus the agent's deploy time for a job alone
    (uncontended), and under load from the job's reservation (the queue wait excluded);
  * where a job's time goes, phase by phase (alone and under load);
  * the machine during the load: its load average, and who used its CPUs (each farm
    process with its children, the clients, and other processes: another user's load
    makes every figure worse, rerun then).

Run: ``python benchmarks/bench_farm.py [--jobs 200] [--clients 20] [--pause 0.2]
[--job-nice N]`` (1-2 minutes for the defaults on 2 cores, the export made first
included). Exit status 1 if a job is lost, duplicated or wrong.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import psutil

import aidge_deploy
from aidge_deploy.config import DeployConfig
from aidge_deploy.defaults import DEFAULT_JOB_NICE
from aidge_deploy.errors import ConnectError
from aidge_deploy.farm.archive import pack_export
from aidge_deploy.farm.client import FarmClient
from aidge_deploy.farm.resultcodec import decode_result
from common import make_export  # also puts tests/ on sys.path
from farmkit import ALICE, Farm, make_farm

BOARDS_A = {"an386-1": "mps2-an386", "an386-2": "mps2-an386"}
BOARDS_B = {"an386-3": "mps2-an386", "an386-4": "mps2-an386"}
TERMINAL = ("done", "failed", "cancelled")
#: the agent's phases after its claim, in order (``JobRun.phases``)
BOARD_PHASES = ("fetch", "start", "deploy", "exit", "release", "upload")
#: the phases during which the job holds its board (``release`` ends with the unlock)
HELD_PHASES = BOARD_PHASES[: BOARD_PHASES.index("release") + 1]


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


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and all its descendants (live ones, and the ended ones
    their parents have waited for)."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
    return total


def machine_busy() -> float:
    """CPU seconds the whole machine spent busy (all CPUs; idle, I/O wait and time stolen
    by the hypervisor excluded; guest time is counted in user time already)."""
    t = psutil.cpu_times()
    spare = ("idle", "iowait", "steal", "guest", "guest_nice")
    return sum(t) - sum(getattr(t, name, 0.0) for name in spare)


class CpuMeter:
    """Who used the machine's CPUs between ``start()`` and ``stop()``: each farm process
    (with its children: an agent's include its boards' QEMU, builds and runners), this
    process (the clients), and everything else on the machine (other users' work)."""

    def __init__(self, farm: Farm) -> None:
        self.farm = farm
        self.begin: dict[str, float] = {}
        self.used: dict[str, float] = {}
        self.kinds: dict[str, float] = {}
        self.wall = 0.0
        self.load_start = os.getloadavg()
        self.load_end = self.load_start

    def _sample(self) -> dict[str, float]:
        out = {name: tree_cpu(p.pid) for name, p in self.farm.procs.items()}
        me = psutil.Process().cpu_times()
        out["bench (this process)"] = me.user + me.system
        out["machine"] = machine_busy()
        t = psutil.cpu_times()
        out["niced"] = t.nice
        out["interrupts"] = getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)
        out["steal"] = getattr(t, "steal", 0.0)
        out["wall"] = time.monotonic()
        return out

    def start(self) -> None:
        self.load_start = os.getloadavg()
        self.begin = self._sample()

    def stop(self, clients: float) -> None:
        """``clients``: CPU seconds the client processes reported."""
        end = self._sample()
        end["clients (their processes)"] = clients
        self.begin["clients (their processes)"] = 0.0
        self.load_end = os.getloadavg()
        self.used = {k: max(0.0, end[k] - self.begin.get(k, end[k])) for k in end}
        self.wall = self.used.pop("wall")
        self.kinds = {k: self.used.pop(k) for k in ("niced", "interrupts", "steal")}

    def print(self) -> None:
        cpus = psutil.cpu_count() or 1
        machine = self.used.get("machine", 0.0)
        ours = sum(v for k, v in self.used.items() if k != "machine")
        la0 = " ".join(f"{x:.1f}" for x in self.load_start)
        la1 = " ".join(f"{x:.1f}" for x in self.load_end)
        print(f"  machine: {cpus} CPUs; load average (1, 5, 15 min) {la0} before, {la1} after")
        if self.wall <= 0:
            return
        print(
            f"  CPU busy during the load        {machine / self.wall:5.2f} of {cpus} cores"
            f"  ({machine / (cpus * self.wall) * 100:.0f} %; niced processes "
            f"{self.kinds['niced'] / self.wall:.2f}, interrupts "
            f"{self.kinds['interrupts'] / self.wall:.2f}, stolen by the host "
            f"{self.kinds['steal'] / self.wall:.2f})"
        )
        for name, sec in sorted(self.used.items(), key=lambda kv: -kv[1]):
            if name != "machine":
                print(f"    {name:<30} {sec / self.wall:5.2f} cores")
        print(
            f"    {'other processes (not the farm)':<30} {max(0.0, machine - ours) / self.wall:5.2f}"
            " cores  (another user's load: rerun if high)"
        )


class Load:
    """What the clients measured (each client process sends its own; merged here)."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.server: list[float] = []
        #: status requests that got no answer: how long they took and why
        self.failed: list[str] = []
        #: the slowest status request: seconds, the clock time it ended, the service's part
        self.slowest: tuple[float, str, float] = (0.0, "", 0.0)
        self.ids: list[int] = []
        self.seen_done: dict[int, float] = {}
        #: CPU seconds the client processes used
        self.cpu = 0.0

    def merge(self, part: dict[str, Any]) -> None:
        self.latencies += part["latencies"]
        self.server += part["server"]
        self.failed += part["failed"]
        self.slowest = max(self.slowest, part["slowest"])
        self.ids += part["ids"]
        self.seen_done.update(part["seen_done"])
        self.cpu += part["cpu"]


def status(c: FarmClient, job_id: int, part: dict[str, Any]) -> dict[str, Any] | None:
    """The job's view, or None when the request failed (counted, the client goes on)."""
    t0 = time.perf_counter()
    try:
        r = c.request("GET", f"/jobs/{job_id}")
    except ConnectError as exc:
        at = time.strftime("%H:%M:%S")
        part["failed"].append(f"at {at}, after {time.perf_counter() - t0:.3f} s: {exc.message}")
        return None
    dt = time.perf_counter() - t0
    part["latencies"].append(dt)
    spent = server_ms(r)
    if spent is not None:
        part["server"].append(spent / 1000)
    if dt > part["slowest"][0]:
        part["slowest"] = (dt, time.strftime("%H:%M:%S"), (spent or 0.0) / 1000)
    view: dict[str, Any] = r.json()
    return view


def client_process(
    url: str,
    archive: bytes,
    n_jobs: int,
    args: argparse.Namespace,
    out: multiprocessing.Queue[Any],
) -> None:
    """One client in its own process, as a user's or a CI job's script is: upload, submit
    ``n_jobs`` by target, then poll their status until all are done. Sends what it
    measured to ``out``."""
    pause = args.pause
    part: dict[str, Any] = {
        "latencies": [],
        "server": [],
        "failed": [],
        "slowest": (0.0, "", 0.0),
        "ids": [],
        "seen_done": {},
    }
    try:
        with FarmClient(url) as c:
            c.login(*ALICE)
            export = c.upload_export(archive, name="tiny_cnn")
            mine = [
                c.submit(export.id, board=None, target="mps2-an386", config={}).id
                for _ in range(n_jobs)
            ]
            part["ids"] = mine
            pending = set(mine)
            while pending:
                for job_id in list(pending):
                    job = status(c, job_id, part)
                    if job is not None and job["state"] in TERMINAL:
                        part["seen_done"][job_id] = time.time()
                        pending.discard(job_id)
                time.sleep(pause)
    finally:
        t = os.times()
        part["cpu"] = t.user + t.system
        out.put(part)


def run_clients(url: str, archive: bytes, args: argparse.Namespace) -> Load:
    """``args.clients`` client processes (forked: the export and the client code are
    loaded already) sharing ``args.jobs`` jobs; what they measured, merged."""
    # A forked child shares the bench's heap (Aidge, numpy, matplotlib: the export was made
    # here) until it writes to it: the child's first full garbage collection touched every
    # inherited object, copied their pages in all 20 clients at once, and stalled a status
    # request for ~9 s. Frozen, the collector leaves them alone (gc.freeze's documented use).
    gc.collect()
    gc.freeze()
    ctx = multiprocessing.get_context("fork")
    out: multiprocessing.Queue[Any] = ctx.Queue()
    shares = [
        args.jobs // args.clients + (1 if i < args.jobs % args.clients else 0)
        for i in range(args.clients)
    ]
    procs = [
        ctx.Process(target=client_process, args=(url, archive, n, args, out), daemon=True)
        for n in shares
    ]
    for p in procs:
        p.start()
    load = Load()
    for _ in procs:
        load.merge(out.get())
    for p in procs:
        p.join()
    return load


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


def held(job: dict[str, Any]) -> tuple[float, float]:
    """When the job held its board: from its claim (the agent has locked the board) to
    the unlock that ends its ``release`` phase (the agent's phase durations added to the
    service's claim time); its end (done) when the agent reported no ``release``."""
    claimed = job["times"]["building"]
    agent = job.get("phases") or {}
    if "release" not in agent:
        return claimed, job["times"]["done"]
    return claimed, claimed + sum(agent.get(n, 0.0) for n in HELD_PHASES)


def board_gaps(done: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """Per board, between a job's unlock and the claim of the board's next job: (unlock to
    the next job's reservation on the board, that reservation to the agent's claim)."""
    by_board: dict[str, list[dict[str, Any]]] = {}
    for j in done:
        by_board.setdefault(j["board"], []).append(j)
    gaps = []
    for jobs in by_board.values():
        jobs.sort(key=lambda j: j["times"]["building"])
        for a, b in itertools.pairwise(jobs):
            t = b["times"]
            gaps.append((t["reserved"] - held(a)[1], t["building"] - t["reserved"]))
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
        "release": "end processes, unlock the board",
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


def utilisation(done: list[dict[str, Any]], boards: int) -> tuple[float, float]:
    """Board utilisation while jobs wait, and that window's length: a board counts as
    busy while a job holds it (``held``: from the claim to the unlock, its results are
    uploaded after); the window runs from the first claim to the last one (after it, no
    job waits any more)."""
    starts = sorted(j["times"]["building"] for j in done)
    w0, w1 = starts[0], starts[-1]
    busy = sum(max(0.0, min(held(j)[1], w1) - max(held(j)[0], w0)) for j in done)
    return (busy / (boards * (w1 - w0)) if w1 > w0 else float("nan")), w1 - w0


def goal(label: str, figure: str, target: str, met: bool | None) -> None:
    verdict = "" if met is None else ("met" if met else "NOT met")
    print(f"  {label:<44} {figure:<24} {target:<12} {verdict}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument(
        "--pause",
        type=float,
        default=0.2,
        help="a client's rest between two rounds of status requests on its jobs (s)",
    )
    ap.add_argument(
        "--job-nice",
        type=int,
        default=DEFAULT_JOB_NICE,
        help="the agents' --job-nice: CPU priority of their jobs' builds and QEMU "
        f"(default: the agent's, {DEFAULT_JOB_NICE}; 0: the service's priority)",
    )
    ap.add_argument("--dump", type=Path, help="write every job's record (JSON) there")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-farm-"))
    export = make_export(tmp, kind="output", target="mps2-an386")
    local = aidge_deploy.deploy(export, DeployConfig())
    assert isinstance(local.output, list)
    archive = pack_export(Path(export.path))
    farm = make_farm(tmp / "farm", agent_timeout=30.0)
    boards = len(BOARDS_A) + len(BOARDS_B)
    try:
        for name, boards_of in (("host-a", BOARDS_A), ("host-b", BOARDS_B)):
            farm.start_agent(name, boards_of, extra=["--job-nice", str(args.job_nice)])
        # one job alone: the farm's overhead without any queue (first run builds: warm up)
        with FarmClient(farm.url) as c:
            c.login(*ALICE)
            up = c.upload_export(archive)
            for _ in range(2):
                t0 = time.time()
                job = c.submit(up.id, board="an386-1", target=None, config={})
                while not (view := c.job(job.id)).state.terminal:
                    time.sleep(0.05)
                seen = time.time()
                deploy_s = view.deploy_seconds or 0.0
                alone = (view.times["done"] - view.times["queued"]) - deploy_s
                alone_total = seen - t0
                alone_deploy = deploy_s
                alone_phases = phases(view.model_dump(mode="json"), seen)
        cpu = CpuMeter(farm)
        cpu.start()
        started = time.time()
        load = run_clients(farm.url, archive, args)
        wall = time.time() - started
        cpu.stop(load.cpu)
        with FarmClient(farm.url) as c:
            c.login(*ALICE)
            jobs = [c.job(i).model_dump(mode="json") for i in load.ids]
            dup = 0
            wrong = 0
            for j in jobs:
                events = c.events(j["id"]).events
                states = Counter(e.state for e in events if e.kind == "state")
                if states["done"] > 1 or states["building"] > 1:
                    dup += 1
                if j["state"] == "done":
                    remote = decode_result(c.result(j["id"]))
                    assert isinstance(remote.output, list)
                    if not all(
                        np.array_equal(r, lo)
                        for r, lo in zip(remote.output, local.output, strict=True)
                    ):
                        wrong += 1
    finally:
        farm.stop_all()
    if args.dump:
        args.dump.write_text(json.dumps(jobs, indent=1), encoding="utf-8")
    done = [j for j in jobs if j["state"] == "done"]
    lost = args.jobs - len(done)
    util, window = utilisation(done, boards)
    held = [(j["times"]["done"] - j["times"]["reserved"]) - j["deploy_seconds"] for j in done]
    total = [(j["times"]["done"] - j["times"]["queued"]) - j["deploy_seconds"] for j in done]
    deploy_s = [j["deploy_seconds"] for j in done]
    lat, srv = load.latencies, load.server
    p99 = percentile(lat, 0.99)
    print(
        f"\n== board farm: {args.jobs} jobs from {args.clients} clients on {boards} emulated "
        f"boards =="
    )
    print(
        f"  clients: {args.clients} processes (one per client, as users' scripts and CI jobs "
        f"are), each polling the status of each of its jobs in turn, then resting {args.pause} s"
    )
    print(
        "  one host for all (service, coordinator, 2 agents, clients), as `farm up`; the "
        f"agents' jobs (runner, build, QEMU) at nice {args.job_nice}"
        + (" (the agent's default)" if args.job_nice == DEFAULT_JOB_NICE else "")
    )
    cpu.print()
    print(f"  {'goal (issue 10)':<44} {'measured':<24} {'target':<12}")
    goal(
        "jobs done, none lost or run twice",
        f"{len(done)}/{args.jobs}, {lost} lost, {dup} twice",
        "all, 0, 0",
        not lost and not dup,
    )
    goal(
        "outputs equal to the local deploy's", f"{len(done) - wrong}/{len(done)}", "all", not wrong
    )
    goal("board utilisation while jobs wait", f"{util * 100:.1f} %", ">= 90 %", util >= 0.9)
    goal(
        "status request p99 under that load (client)", f"{p99 * 1000:.1f} ms", "< 50 ms", p99 < 0.05
    )
    if srv:
        goal("  the same, inside the service", f"{percentile(srv, 0.99) * 1000:.1f} ms", "", None)
    goal("farm overhead per job, alone", f"{alone:.3f} s", "printed", None)
    goal(
        "farm overhead per job under load (median)",
        f"{statistics.median(held):.3f} s",
        "printed",
        None,
    )
    print("  (overhead = submit to done minus the agent's deploy time; under load from the")
    print("   job's reservation on a board, so the queue wait is not counted as overhead)")
    for j in jobs:
        if j["state"] != "done":
            print(f"    job {j['id']} {j['state']}: {(j.get('error') or {}).get('message')}")
    print("\n  details")
    print(
        f"  wall time of the load           {wall:8.1f} s  ({len(done) / wall:.2f} jobs/s, "
        f"from {time.strftime('%H:%M:%S', time.localtime(started))})"
    )
    print(f"  jobs waited for a board during  {window:8.1f} s  (the utilisation's window)")
    print(
        f"  agent deploy time per job       alone {alone_deploy:.3f} s, under load median "
        f"{statistics.median(deploy_s):.3f} s"
    )
    gaps = board_gaps(done)
    if gaps:
        idle = [a + b for a, b in gaps]
        released = [a for a, _ in gaps]
        claimed = [b for _, b in gaps]
        print(
            f"  board idle between two jobs     median {statistics.median(idle):6.3f} s  "
            f"p90 {percentile(idle, 0.9):6.3f} s  mean {statistics.mean(idle):6.3f} s"
        )
        print(
            f"    unlock to next reservation    median {statistics.median(released):6.3f} s  "
            f"p90 {percentile(released, 0.9):6.3f} s  mean {statistics.mean(released):6.3f} s"
        )
        print(
            f"    reservation to claim          median {statistics.median(claimed):6.3f} s  "
            f"p90 {percentile(claimed, 0.9):6.3f} s  mean {statistics.mean(claimed):6.3f} s"
        )
    print(
        f"  status requests                 {len(lat)} in {wall:.1f} s ({len(lat) / wall:.0f}/s, "
        f"{len(lat) / max(1, len(load.ids)):.0f} per job); "
        f"p50 {percentile(lat, 0.5) * 1000:.1f} ms, p90 {percentile(lat, 0.9) * 1000:.1f} ms, "
        f"p99 {p99 * 1000:.1f} ms, max {load.slowest[0] * 1000:.1f} ms (at {load.slowest[1]}, "
        f"{load.slowest[2] * 1000:.1f} ms of it in the service)"
    )
    if load.failed:
        print(f"    failed (no answer)            {len(load.failed)}, e.g. {load.failed[0]}")
    if srv:
        print(
            f"    of which in the service       p50 {percentile(srv, 0.5) * 1000:.1f} ms, "
            f"p90 {percentile(srv, 0.9) * 1000:.1f} ms, p99 {percentile(srv, 0.99) * 1000:.1f} ms"
            "  (its Server-Timing header)"
        )
    print(
        f"  farm overhead, job alone        {alone:6.3f} s  (the client saw submit to done in "
        f"{alone_total:.3f} s)"
    )
    print(
        f"  farm overhead under load        median {statistics.median(held):6.3f} s  "
        f"p90 {percentile(held, 0.9):6.3f} s"
    )
    print(
        f"  submit to done minus deploy     median {statistics.median(total):6.2f} s  "
        "(queue wait included)"
    )
    print_phases(alone_phases, [phases(j, load.seen_done.get(j["id"])) for j in done])
    return 1 if lost or dup or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
