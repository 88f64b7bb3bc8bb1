"""The farm end to end on loopback: a real labgrid coordinator, the service, and two agents
in separate processes and folders (two "hosts"), each serving two emulated QEMU boards.

Guide example 3 returns what a local deploy returns; the published Cortex-M helpers reach
the farm through ``--backend api``; cancel leaves no process; a killed agent's job fails
"agent lost" and the next job runs on the other agent's board; a service killed and
restarted mid-load ends every job ``done`` exactly once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest

import aidge_deploy
from aidge_deploy.config import DeployConfig
from envparts import needs
from farmkit import ALICE, Farm, make_farm, needs_farm, qemu_available, stalled_export

pytestmark = [
    needs_farm(),
    pytest.mark.slow,
    pytest.mark.qemu,
    needs(qemu_available(), "QEMU or the Arm toolchain is missing"),
]

HOST_A = {"an386-a": "mps2-an386", "an547-a": "mps3-an547"}
HOST_B = {"an386-b": "mps2-an386", "netduino-b": "netduinoplus2"}


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    farm = make_farm(tmp_path_factory.mktemp("farm-e2e"), agent_timeout=6.0)
    try:
        farm.start_agent("host-a", HOST_A)
        farm.start_agent("host-b", HOST_B)
        yield farm
    finally:
        farm.stop_all()


def api_config(farm: Farm, board: str | None = None, **kw: Any) -> DeployConfig:
    return DeployConfig(
        backend="api",
        api_url=farm.url + "/api",
        api_username=ALICE[0],
        api_password=ALICE[1],
        api_board_name=board,
        api_poll_interval=0.5,
        **kw,
    )


def _same_result(remote: Any, local: Any) -> None:
    if isinstance(local.output, list):
        assert isinstance(remote.output, list) and len(remote.output) == len(local.output)
        for r, lo in zip(remote.output, local.output, strict=True):
            assert r.dtype == lo.dtype and np.array_equal(r, lo)
    else:
        assert remote.output == local.output
    assert remote.timings == local.timings
    assert list(remote.memory_peak_bytes or []) == list(local.memory_peak_bytes or [])
    assert remote.layers == local.layers
    assert remote.measurements == local.measurements
    assert remote.metrics["cycles"] == local.metrics["cycles"]
    assert remote.protocol == local.protocol


def test_guide_example_3_equals_local(  # type: ignore[no-untyped-def]
    farm: Farm, export_factory, tmp_path: Path, monkeypatch
) -> None:
    from aidge_deploy.pipeline.runner import PipelineRunner
    from aidge_deploy.progress import ProgressUpdate

    export = export_factory("output", target="mps2-an386")
    local = aidge_deploy.deploy(export, DeployConfig(target="mps2-an386"))
    seen: list[ProgressUpdate] = []

    def no_local_stage(self: Any, ctx: Any) -> Any:
        raise AssertionError("an api deploy ran the local pipeline")

    with monkeypatch.context() as patched:  # the whole deploy is the farm's: no local stage
        patched.setattr(PipelineRunner, "run", no_local_stage)
        remote = aidge_deploy.deploy(
            export,
            api_config(farm, "an386-b", target="mps2-an386", report_dir=tmp_path / "bundle"),
            progress=seen.append,
        )
    # the board host's stages are reported under their own names, after the farm's steps
    stages = [u.stage for u in seen if u.kind == "start"]
    assert stages[0] == "Farm" and {"Build", "Execute", "ParseOutput"} <= set(stages), stages
    assert any("running" in u.message for u in seen if u.stage == "Farm"), seen
    _same_result(remote, local)
    assert remote.backend == "api" and remote.farm_board == "an386-b"
    assert remote.farm_job_id is not None
    assert remote.log_path is not None and remote.log_path.is_file()
    assert (tmp_path / "bundle" / "summary.json").is_file()
    # the agent reported where the job's time went on its host
    with farm.client(*ALICE) as alice:
        phases = alice.get(f"/api/jobs/{remote.farm_job_id}").json()["phases"]
    assert set(phases) >= {"lock", "claim", "fetch", "start", "deploy", "exit", "upload"}, phases
    assert all(v >= 0 for v in phases.values()), phases
    # by target, with the URL written without /api and a trailing slash
    cfg = api_config(farm)
    cfg.api_url = farm.url + "/"
    bench = export_factory("benchmark", target="mps3-an547", nb_iterations=3)
    by_target = aidge_deploy.deploy(bench, cfg)
    assert by_target.farm_board == "an547-a"
    local_bench = aidge_deploy.deploy(bench, DeployConfig())
    _same_result(by_target, local_bench)
    # an emulated board's times are estimates from its instruction count (issue 9)
    assert {m.provenance.value for m in by_target.measurements if m.name.startswith("latency")} == {
        "estimated"
    }
    assert by_target.timing == local_bench.timing


def test_errors_are_typed(farm: Farm, export_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from aidge_deploy.errors import AuthenticationError, ConnectError, UnknownBoardError

    export = export_factory("output", target="mps2-an386")
    with pytest.raises(UnknownBoardError, match="did you mean 'an386-b' or 'an386-a'") as err:
        aidge_deploy.deploy(export, api_config(farm, "an386-c"))
    assert "an547-a" in (err.value.hint or "")
    bad = api_config(farm, "an386-a")
    bad.api_password = "not-the-password"
    with pytest.raises(AuthenticationError) as auth:
        aidge_deploy.deploy(export, bad)
    assert "not-the-password" not in str(auth.value)
    dead = api_config(farm, "an386-a")
    dead.api_url = "http://127.0.0.1:9/api"
    with pytest.raises(ConnectError, match="cannot reach the board farm"):
        aidge_deploy.deploy(export, dead)
    # the password from the environment (no option anywhere)
    monkeypatch.setenv("AIDGE_DEPLOY_API_PASSWORD", ALICE[1])
    env_cfg = api_config(farm, "an386-a")
    env_cfg.api_password = None
    assert aidge_deploy.deploy(export, env_cfg).farm_board == "an386-a"


def test_published_helpers_with_backend_api(
    farm: Farm, tiny_cnn: Path, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """``aidge_export_arm_cortexm``: ``backend_from_args(--backend api)`` → ``benchmark()``
    and ``run()`` return their results through the farm, equal to a local deploy's."""
    import argparse

    import aidge_backend_cpu  # noqa: F401
    import aidge_onnx
    from aidge_core.export_utils.config import BenchmarkConfig, ExportConfig
    from aidge_export_arm_cortexm.benchmark import backend_from_args
    from aidge_export_arm_cortexm.benchmark_helpers import execution

    import aidge_qemu_boards  # noqa: F401
    import modelzoo

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AIDGE_BENCHMARK_API_PASSWORD", ALICE[1])
    args = argparse.Namespace(
        backend="api",
        api_url=farm.url + "/api",
        api_username=ALICE[0],
        api_password=ALICE[1],
        api_board_name=None,
        api_poll_interval=0.5,
        api_request_timeout=30.0,
    )
    backend = backend_from_args(args, board="an386-a")
    x = modelzoo.sample_input((1, 3, 4, 4))
    results = execution.benchmark(
        aidge_onnx.load_onnx(str(tiny_cnn)),
        input_data=[("x", x)],
        backend=backend,
        export_cfg=ExportConfig(target="mps2-an386", export_folder=str(tmp_path / "bench")),
        bench_cfg=BenchmarkConfig(nb_iterations=3, nb_warmup=1, profiling=True),
    )
    local = aidge_deploy.deploy(str(tmp_path / "bench"), DeployConfig())
    assert isinstance(local.output, dict)
    assert results["timings"] == local.output["timings"]
    assert results["layer_cycles"] == local.output["layer_cycles"]

    model = aidge_onnx.load_onnx(str(tiny_cnn))
    model.set_backend("cpu")
    model.forward_dims([[1, 3, 4, 4]], True)
    firmware = execution.compile_output_firmware(
        model,
        input_data=[("x", x)],
        export_cfg=ExportConfig(target="mps2-an386", export_folder=str(tmp_path / "out")),
        bench_cfg=BenchmarkConfig(mode="output"),
    )
    outputs, _cycles = execution.run(firmware, backend=backend)
    np.testing.assert_allclose(
        outputs[0], modelzoo.onnx_reference(tiny_cnn, x), atol=2e-6, rtol=1e-5
    )


def _wait_job(client: Any, job_id: int, states: set[str], timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    job: dict[str, Any] = {}
    while time.monotonic() < deadline:
        job = client.get(f"/api/jobs/{job_id}").json()
        if job["state"] in states:
            return job
        if job["state"] in ("done", "failed", "cancelled"):  # it will not change any more
            raise AssertionError(f"job {job_id} ended {job['state']}, wanted {states}: {job}")
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} stayed {job.get('state')}, wanted {states}")


def _submit(
    client: Any, export: Any, board: str | None = None, retries: int | None = None, **config: Any
) -> int:
    from aidge_deploy.farm.archive import pack_export

    up = client.post("/api/exports", content=pack_export(Path(export.path)))
    assert up.status_code == 201, up.text
    r = client.post(
        "/api/jobs",
        json={
            "export": up.json()["id"],
            "board": board,
            "target": None if board else up.json()["target"],
            "config": config,
            "retries": retries,
        },
    )
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _assert_background_work(farm: Farm, job_id: int) -> None:
    """A job's processes (runner, QEMU) run at the agent's job priority, their session's
    CPU group too where the kernel groups by session; the agents stay at their own."""
    from aidge_deploy.defaults import DEFAULT_JOB_NICE

    suite = os.nice(0)  # the suite may itself run niced (nice ./run.sh test): relative to it
    pids = farm.job_processes(job_id)
    assert pids
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc = psutil.Process(pid)
            assert proc.nice() == max(DEFAULT_JOB_NICE, suite), (proc.cmdline(), proc.nice())
            group = Path(f"/proc/{pid}/autogroup")
            if group.exists():  # "/autogroup-123 nice 10"
                assert int(group.read_text().split()[-1]) >= DEFAULT_JOB_NICE, (
                    proc.cmdline(),
                    group.read_text(),
                )
    agents = [p for name, p in farm.procs.items() if name.startswith("agent-") and p.poll() is None]
    assert agents and {psutil.Process(p.pid).nice() for p in agents} == {suite}


def test_cancel_running_job_leaves_nothing(farm: Farm, export_factory) -> None:  # type: ignore[no-untyped-def]
    # a firmware that holds its board long enough to be cancelled while QEMU runs
    export = stalled_export(export_factory("output", target="mps2-an386"), farm.root, 120)
    with farm.client(*ALICE) as alice:
        job_id = _submit(alice, export, "an386-a", run_timeout=300)
        _wait_job(alice, job_id, {"running"}, timeout=180)
        time.sleep(0.5)
        assert farm.job_processes(job_id), "the job runs in processes marked with its id"
        _assert_background_work(farm, job_id)
        alice.post(f"/api/jobs/{job_id}/cancel")
        job = _wait_job(alice, job_id, {"cancelled", "failed", "done"}, timeout=60)
        assert job["state"] == "cancelled", job
        deadline = time.monotonic() + 15
        while farm.job_processes(job_id) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not farm.job_processes(job_id), "a process of the cancelled job is still running"
        # the board is free again: the next job on it runs
        quick = export_factory("output", target="mps2-an386")
        nxt = _submit(alice, quick, "an386-a")
        assert _wait_job(alice, nxt, {"done", "failed"})["state"] == "done"


def test_run_timeout_fails_the_job_and_frees_the_board(farm: Farm, export_factory) -> None:  # type: ignore[no-untyped-def]
    """A job whose run outlasts its ``run_timeout`` fails with the deploy's own error; the
    agent ends its processes and frees the board for the next job."""
    quick = export_factory("output", target="mps2-an386")
    slow = stalled_export(quick, farm.root, 60)
    with farm.client(*ALICE) as alice:
        job_id = _submit(alice, slow, "an386-b", run_timeout=1)
        job = _wait_job(alice, job_id, {"failed", "done", "cancelled"}, timeout=240)
        assert job["state"] == "failed", job
        assert "No end marker" in job["error"]["message"], job["error"]
        # the firmware had started (its banner came): the user's failure, not retried
        assert job["failure_class"] == "user" and job["attempt"] == 1, job
        assert job["error"]["hint"], job["error"]
        deadline = time.monotonic() + 15
        while farm.job_processes(job_id) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not farm.job_processes(job_id), "a process of the timed-out job is still running"
        # the output captured up to the timeout is kept: the firmware had started
        assert "DEMO EXPORT ARM" in alice.get(f"/api/jobs/{job_id}/log").text
        nxt = _submit(alice, quick, "an386-b")
        assert _wait_job(alice, nxt, {"done", "failed"})["state"] == "done"


def test_agent_killed_mid_run(farm: Farm, export_factory) -> None:  # type: ignore[no-untyped-def]
    quick = export_factory("output", target="mps2-an386")
    slow = stalled_export(quick, farm.root, 120)
    with farm.client(*ALICE) as alice:
        # both an386 boards busy, then one more job waits for either; the first asks for
        # no retry (an agent lost is an infrastructure failure: retried by default)
        first = _submit(alice, slow, "an386-a", retries=0, run_timeout=300)
        _wait_job(alice, first, {"running"}, timeout=180)
        farm.kill("agent-host-a", signal.SIGKILL)
        job = _wait_job(alice, first, {"failed", "done", "cancelled"}, timeout=60)
        assert job["state"] == "failed" and "agent lost" in job["error"]["message"], job
        assert job["failure_class"] == "infrastructure" and job["attempt"] == 1, job
        boards = {b["name"]: b["state"] for b in alice.get("/api/boards").json()}
        assert boards["an386-a"] == "offline" and boards["an547-a"] == "offline"
        nxt = _submit(alice, quick)  # any mps2-an386: only host-b's is online
        done = _wait_job(alice, nxt, {"done", "failed"})
        assert done["state"] == "done" and done["board"] == "an386-b", done
    # the killed agent left its QEMU as an orphan of nobody we track: end it for the next tests
    farm.end_job_processes(first)
    farm.start_agent("host-a", HOST_A)
    # the killed agent's board was freed (its labgrid lock and reservation): back with its
    # agent, it takes the next job
    with farm.client(*ALICE) as alice:
        again = _wait_job(alice, _submit(alice, quick, "an386-a"), {"done", "failed"})
        assert again["state"] == "done" and again["board"] == "an386-a", again


def test_service_restart_loses_no_job(farm: Farm, export_factory) -> None:  # type: ignore[no-untyped-def]
    exports = [
        export_factory("output", target="mps2-an386"),
        export_factory("output", target="mps3-an547"),
        export_factory("output", target="netduinoplus2"),
    ]
    ids: list[int] = []
    outcome: list[Any] = []

    def follow() -> None:  # a deploy() client following its job across the restart
        try:
            outcome.append(aidge_deploy.deploy(exports[0], api_config(farm)))
        except Exception as exc:  # handed to the test
            outcome.append(exc)

    with farm.client(*ALICE) as alice:
        for i in range(20):
            ids.append(_submit(alice, exports[i % 3]))
        client = threading.Thread(target=follow, daemon=True)
        client.start()
        deadline = time.monotonic() + 120
        # its job is submitted (the earlier tests' jobs are in the list too)
        while max(j["id"] for j in alice.get("/api/jobs").json()) <= max(ids):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        # some jobs are on boards, the rest queued
        _wait_job(alice, ids[0], {"building", "flashing", "running", "collecting", "done"}, 120)
    farm.kill("service", signal.SIGKILL)
    time.sleep(1.0)
    farm.start_service()
    client.join(600)
    # the client retried through the restart and re-attached to its job
    assert len(outcome) == 1 and not isinstance(outcome[0], Exception), outcome
    assert outcome[0].farm_job_id not in ids and outcome[0].farm_board in HOST_A | HOST_B
    with farm.client(*ALICE) as alice:
        for job_id in ids:
            job = _wait_job(alice, job_id, {"done", "failed", "cancelled"}, timeout=600)
            assert job["state"] == "done", job
            events = alice.get(f"/api/jobs/{job_id}/events").json()["events"]
            states = Counter(e["state"] for e in events if e["kind"] == "state")
            assert states["done"] == 1 and states["building"] == 1, (job_id, states)


def test_cli_backend_api(farm: Farm, export_factory) -> None:  # type: ignore[no-untyped-def]
    """``aidge-deploy run --backend api``: the password from the environment, no option."""
    import json
    import os
    import sys

    export = export_factory("output", target="mps2-an386")
    exe = str(Path(sys.executable).parent / "aidge-deploy")
    base = [exe, "run", str(export.path), "--backend", "api", "--api-url", farm.url + "/api"]
    base += ["--api-username", ALICE[0], "--api-board-name", "an547-a"]
    env = {**os.environ, "AIDGE_DEPLOY_API_PASSWORD": ALICE[1]}
    refused = subprocess.run(
        [*base, "--api-password", ALICE[1]], capture_output=True, text=True, env=env, timeout=60
    )
    assert refused.returncode != 0 and "--api-password" in refused.stderr
    # a board of another target: a clear refusal from the farm
    wrong = subprocess.run([*base, "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert wrong.returncode == 2 and "is a mps3-an547" in wrong.stderr, wrong.stderr
    assert ALICE[1] not in wrong.stderr + wrong.stdout
    ok = subprocess.run(
        [*base[:-1], "an386-b", "--json"], capture_output=True, text=True, env=env, timeout=300
    )
    assert ok.returncode == 0, ok.stderr
    data = json.loads(ok.stdout)
    assert data["backend"] == "api" and data["farm_board"] == "an386-b" and data["farm_job_id"]


def test_coordinator_restart_is_survived(farm: Farm, export_factory) -> None:  # type: ignore[no-untyped-def]
    """labgrid drops every lock and reservation when its coordinator restarts: the service
    re-creates the queue and locks the running job's board again; all jobs end done."""
    quick = export_factory("output", target="mps2-an386")
    slow = stalled_export(quick, farm.root, 12)  # running across the coordinator's restart
    with farm.client(*ALICE) as alice:
        running = _submit(alice, slow, "an386-b", run_timeout=300)
        _wait_job(alice, running, {"running"}, timeout=180)
        queued = [_submit(alice, quick, "an386-b") for _ in range(2)]
        farm.kill("coordinator", signal.SIGTERM)
        farm.start_coordinator()  # same address and working folder
        for job_id in [running, *queued]:
            job = _wait_job(alice, job_id, {"done", "failed", "cancelled"}, timeout=300)
            assert job["state"] == "done", job
        # nothing is left locked or reserved for finished jobs
        boards = {b["name"]: b["state"] for b in alice.get("/api/boards").json()}
        assert boards["an386-b"] == "idle", boards
