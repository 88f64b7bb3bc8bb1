"""``multitarget.run_targets``: lanes respected, failures kept apart, a cancellation stops all.

The jobs are real processes (``sleep`` under the run's control, as a build or QEMU would
be); what is checked is the order in which they held the machine, never how long they took.
"""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

import psutil
import pytest

from aidge_deploy.connections.local_process import run_process
from aidge_deploy.multitarget import (
    JobEventKind,
    Lane,
    TargetJob,
    lane_for,
    run_targets,
)
from aidge_deploy.runcontrol import RunControl, RunInterrupted, interruptible


class Spans:
    """Each job's (start, end) on one clock, written by the jobs' threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: dict[str, tuple[float, float]] = {}

    def job(self, name: str, hold_s: float = 0.3) -> TargetJob[str]:
        def run(control: RunControl) -> str:
            start = time.monotonic()
            time.sleep(hold_s)
            with self.lock:
                self.spans[name] = (start, time.monotonic())
            return name

        return TargetJob(name, run)

    def overlap(self, a: str, b: str) -> bool:
        (s1, e1), (s2, e2) = self.spans[a], self.spans[b]
        return s1 < e2 and s2 < e1


def test_lanes_decide_what_overlaps() -> None:
    spans = Spans()

    def on(lane: Lane, name: str, board: str | None = None) -> TargetJob[str]:
        job = spans.job(name)
        return TargetJob(name, job.run, lane, board)

    jobs = [
        on(Lane.PARALLEL, "an386"),
        on(Lane.PER_BOARD, "nucleo-1", "probe-A"),
        on(Lane.ALONE, "host"),
        on(Lane.PER_BOARD, "nucleo-2", "probe-A"),
        on(Lane.PARALLEL, "an547"),
        on(Lane.PER_BOARD, "pi", "ssh-pi"),
    ]
    events: list[tuple[str, JobEventKind]] = []
    outcomes = run_targets(jobs, workers=4, on_event=lambda e: events.append((e.job, e.kind)))
    assert [o.value for o in outcomes] == [j.name for j in jobs]  # in the order asked
    assert all(o.ok for o in outcomes)
    # the measured host run had the machine to itself
    assert not any(spans.overlap("host", other) for other in spans.spans if other != "host")
    # one board, one run at a time, in the order given
    assert not spans.overlap("nucleo-1", "nucleo-2")
    assert spans.spans["nucleo-1"][1] <= spans.spans["nucleo-2"][0]
    # independent targets ran together (four workers, five jobs left after the host)
    assert spans.overlap("an386", "an547") and spans.overlap("an386", "pi")
    assert sorted(k for _, k in events) == sorted([JobEventKind.START, JobEventKind.DONE] * 6)


def test_workers_bound_the_parallel_jobs() -> None:
    spans = Spans()
    jobs = [spans.job(f"j{i}", 0.2) for i in range(4)]
    run_targets(jobs, workers=2)
    for a, b, c in itertools.combinations(spans.spans, 3):
        assert not (spans.overlap(a, b) and spans.overlap(b, c) and spans.overlap(a, c)), (
            "three jobs ran at once with two workers"
        )


def test_farm_jobs_wait_beside_the_parallel_ones_past_the_cores() -> None:
    """Farm jobs only wait for the farm: four of them and two emulated boards run at once on a
    machine given two workers (a laptop keeps the farm's boards busy)."""
    together = threading.Barrier(6, timeout=60)  # breaks unless all six are running at once

    def meet(control: RunControl) -> str:
        return str(together.wait())

    remote = [TargetJob(f"farm{i}", meet, Lane.REMOTE) for i in range(4)]
    local = [TargetJob(f"qemu{i}", meet) for i in range(2)]
    outcomes = run_targets([*remote, *local], workers=2, remote_workers=4)
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    spans = Spans()
    remote = [TargetJob(f"farm{i}", spans.job(f"farm{i}").run, Lane.REMOTE) for i in range(3)]
    run_targets(remote, workers=8, remote_workers=2)
    assert not (
        spans.overlap("farm0", "farm1")
        and spans.overlap("farm1", "farm2")
        and spans.overlap("farm0", "farm2")
    ), "three farm jobs at once with two remote workers"


def test_a_failing_job_does_not_stop_the_others() -> None:
    def boom(control: RunControl) -> str:
        raise ValueError("no such board")

    spans = Spans()
    outcomes = run_targets([TargetJob("bad", boom), spans.job("good")], workers=2)
    assert isinstance(outcomes[0].error, ValueError) and not outcomes[0].ok
    assert outcomes[1].ok and outcomes[1].value == "good"


def _sleeper(tmp_path: Path, name: str) -> TargetJob[None]:
    def run(control: RunControl) -> None:
        run_process(
            ["/bin/sh", "-c", "sleep 300 & sleep 300"],
            cwd=tmp_path,
            timeout_s=600,
            stdout_path=tmp_path / f"{name}.out",
            stderr_path=tmp_path / f"{name}.err",
        )

    return TargetJob(name, run)


def _sleeps() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if p.name() == "sleep"]


def _wait_for_sleeps(count: int) -> None:
    deadline = time.monotonic() + 60
    while len(_sleeps()) < count:
        assert time.monotonic() < deadline, "the jobs' processes never started"
        time.sleep(0.05)


def test_cancel_from_another_thread_stops_every_job(tmp_path: Path) -> None:
    control = RunControl()
    jobs = [_sleeper(tmp_path, f"s{i}") for i in range(3)] + [_sleeper(tmp_path, "queued")]

    def cancel_when_running() -> None:
        _wait_for_sleeps(6)  # three jobs, two sleeps each; the fourth waits for a worker
        control.cancel("job cancelled by its owner")

    watcher = threading.Thread(target=cancel_when_running, daemon=True)
    watcher.start()
    with pytest.raises(RunInterrupted, match="job cancelled by its owner"):
        run_targets(jobs, workers=3, control=control)
    watcher.join(5)
    assert _sleeps() == []


def test_a_signal_in_the_calling_thread_stops_every_job(tmp_path: Path, ctrl_c: None) -> None:
    import os
    import signal

    control = RunControl()
    jobs = [_sleeper(tmp_path, f"s{i}") for i in range(2)]

    def interrupt_when_running() -> None:
        _wait_for_sleeps(4)
        os.kill(os.getpid(), signal.SIGTERM)

    watcher = threading.Thread(target=interrupt_when_running, daemon=True)
    watcher.start()
    with pytest.raises(RunInterrupted) as info, interruptible(control):
        run_targets(jobs, workers=2, control=control)
    watcher.join(5)
    assert info.value.signal_number == signal.SIGTERM and info.value.exit_status == 143
    assert _sleeps() == []


def test_lane_for_targets() -> None:
    assert lane_for("mps2-an386") is Lane.PARALLEL
    assert lane_for("host") is Lane.PARALLEL  # an output check is not timed
    assert lane_for("host", measured_on_host=True) is Lane.ALONE
    assert lane_for("stm32h7a3") is Lane.PER_BOARD  # a board on a probe: its caps' lane
    assert lane_for("raspberrypi", backend="ssh") is Lane.PER_BOARD
    assert lane_for("host", backend="ssh", measured_on_host=True) is Lane.PER_BOARD
    assert lane_for("stm32h7a3", backend="api") is Lane.REMOTE
    with pytest.raises(ValueError, match="names its board"):
        TargetJob("x", lambda c: None, Lane.PER_BOARD)
