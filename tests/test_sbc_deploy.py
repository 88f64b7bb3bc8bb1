"""Deploying to Linux boards over SSH and in Docker, end to end, against real test boards.

Every test deploys real Aidge exports through ``deploy()`` to the boards of ``boards.py``: a
real sshd on loopback (the "Raspberry Pi"), a real dockerd driven over SSH, the loopback board
running cross-compiled aarch64 binaries through binfmt, and a netns board for the unreachable
case. Faults are real too: sshd sessions are SIGKILLed mid-upload and mid-run, the export is
patched to sleep or to fail, the remote folder is unwritable.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncssh
import numpy as np
import pytest

import aidge_deploy
from aidge_deploy import DeployConfig
from aidge_deploy.artifact import export_hash
from aidge_deploy.backendoptions import DockerOptions, SshOptions
from aidge_deploy.boards.seccomp import PROFILE_NAME, perf_profile
from aidge_deploy.config import BenchmarkConfig
from aidge_deploy.connections.ssh_settings import PASSPHRASE_ENV
from aidge_deploy.errors import (
    AuthenticationError,
    BuildError,
    ConnectError,
    DeployError,
    ExecutionError,
    HostKeyError,
    PreflightError,
    TransferError,
)
from aidge_deploy.firmwareid import UNVERIFIED
from aidge_deploy.progress import ProgressUpdate
from aidge_deploy.report.metadata import toolchain_versions
from aidge_deploy.results import BuildStatus, DeployResult, Provenance, Toolchain
from boards import Aarch64Board, DockerBoard, SshBoard
from envparts import not_applicable
from proctree import patch_main

pytestmark = [pytest.mark.slow, pytest.mark.ssh]

#: the SSH record's own options of a test board: no ssh_config, no agent, one attempt
FAST_SSH = SshOptions(config_path=None, allow_agent=False, connect_attempts=1)


def board_config(board: SshBoard, **values: Any) -> DeployConfig:
    """The config of a test board; ``values`` of ``SshOptions``' own fields go to its record."""
    own = {k: values.pop(k) for k in list(values) if k in SshOptions.own_fields()}
    base: dict[str, Any] = {
        "target": "raspberrypi",
        "backend": "ssh",
        "ssh_host": board.host,
        "ssh_port": board.port,
        "ssh_user": board.user,
        "ssh_key_path": board.key_path,
        "ssh_known_hosts_path": board.known_hosts_path,
    }
    record = dataclasses.replace(FAST_SSH, **own)
    return DeployConfig(**{**base, **values}, backend_options=(record,))


def private_copy(artifact: Any, tmp_path: Path, name: str = "export") -> Path:
    """A copy of the export in a fresh folder: its own remote cache entry on the board."""
    dest = tmp_path / f"{name}-{uuid.uuid4().hex[:8]}"
    shutil.copytree(Path(artifact.path), dest)
    return dest


def progress_log() -> tuple[list[str], Callable[[ProgressUpdate], None]]:
    messages: list[str] = []
    return messages, lambda update: messages.append(f"{update.stage}: {update.message}")


def board_processes(board: SshBoard, pattern: str) -> list[str]:
    out = board.run_as_user('ps -ww -u "$(id -un)" -o stat=,args=').stdout
    return [
        line
        for line in out.splitlines()
        if pattern in line and not line.lstrip().startswith("Z") and "ps -u" not in line
    ]


@pytest.fixture(scope="module")
def host_outputs(export_factory: Callable[..., Any]) -> list[np.ndarray]:
    result = aidge_deploy.deploy(export_factory("output"), DeployConfig())
    assert isinstance(result.output, list)
    return result.output


@pytest.fixture(scope="module")
def rpi_output(export_factory: Callable[..., Any]) -> Any:
    return export_factory("output", target="raspberrypi")


def assert_identical(result: DeployResult, reference: list[np.ndarray]) -> None:
    assert isinstance(result.output, list) and len(result.output) == len(reference)
    for got, want in zip(result.output, reference, strict=True):
        np.testing.assert_array_equal(got, want)


def peak_rss_metric(result: DeployResult) -> int:
    metric = result.metric("peak_rss")
    # measured on the board: silicon for a board target, host for the host reached over SSH
    expected = Provenance.HOST if result.target == "host" else Provenance.SILICON
    assert metric is not None and metric.provenance == expected
    assert isinstance(metric.value, int) and metric.value > 100_000
    return metric.value


# ----------------------------------------------------------------------------- acceptance


@pytest.mark.docker
def test_guide_example_2_ssh_docker_benchmark(
    docker_board: DockerBoard, export_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """The deploy guide's Example 2: a Raspberry Pi target, in Docker on the board."""
    export = export_factory("benchmark", target="raspberrypi", nb_iterations=50)
    config = board_config(
        docker_board.ssh,
        backend="ssh_docker",
        docker_image=docker_board.image,
        benchmark=BenchmarkConfig(nb_iterations=50),
    )
    messages, progress = progress_log()
    result = aidge_deploy.deploy(export, config, progress=progress, work_dir=tmp_path / "run")
    assert result.target == "raspberrypi" and result.backend == "ssh_docker"
    assert result.timings is not None and len(result.timings) == 50
    assert all(t > 0 for t in result.timings)
    assert result.latency is not None and result.latency.n == 50
    peak_rss_metric(result)
    # The test image has no compiler: built on the board's OS, run in the container.
    assert any("(board)" in n for n in result.metrics["notices"])
    assert result.build is not None and "(board)" in result.build.log
    assert any(m.startswith("Execute: running run_export in container") for m in messages)
    leftovers = docker_board.docker("ps", "-a", "--format", "{{.Names}}").stdout
    assert "aidge-deploy-" not in leftovers


def test_ssh_outputs_identical_to_host_and_peak_rss_from_the_board(
    ssh_board: SshBoard, rpi_output: Any, host_outputs: list[np.ndarray], tmp_path: Path
) -> None:
    messages, progress = progress_log()
    result = aidge_deploy.deploy(
        rpi_output,
        board_config(ssh_board, sbc_board_name="pi-lab-3"),
        work_dir=tmp_path / "run",
        progress=progress,
    )
    assert_identical(result, host_outputs)
    # built on the board, the program printed this export's hash (firmwareid): verified
    assert UNVERIFIED not in result.metrics["notices"]
    log = Path(str(result.log_path)).read_text()
    assert re.search(rf"^AIDGE_EXPORT_HASH {export_hash(rpi_output)}$", log, re.MULTILINE)
    assert result.execution is not None and result.execution.peak_rss_bytes
    assert peak_rss_metric(result) == result.execution.peak_rss_bytes
    record = (tmp_path / "run" / "remote.json").read_text()
    assert '"build_location": "board"' in record
    # the board's logical name (a lab file's) names it in messages and in its record
    assert '"board_name": "pi-lab-3"' in record
    assert any(m.startswith("Prepare: connecting to pi-lab-3 (") for m in messages), messages
    assert "/tools/perf_run-" in record  # the launcher lives on the board
    assert result.build is not None and str(result.build.artifact_path).startswith(
        f"/home/{ssh_board.user}" if ssh_board.user != "root" else "/root"
    )


@pytest.mark.docker
def test_ssh_docker_and_local_docker_outputs_identical_to_host(
    docker_board: DockerBoard,
    rpi_output: Any,
    export_factory: Callable[..., Any],
    host_outputs: list[np.ndarray],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    remote = aidge_deploy.deploy(
        rpi_output,
        board_config(docker_board.ssh, backend="ssh_docker", docker_image=docker_board.image),
    )
    assert_identical(remote, host_outputs)
    monkeypatch.setenv("DOCKER_HOST", docker_board.docker_host)
    local = aidge_deploy.deploy(
        export_factory("output"), DeployConfig(docker_image=docker_board.image)
    )
    assert_identical(local, host_outputs)
    # both programs print their export's hash: built on the board, and in a local container
    for result in (remote, local):
        assert UNVERIFIED not in result.metrics["notices"], result.metrics["notices"]
    assert any("run in container" in n for n in local.metrics["notices"])
    peak_rss_metric(local)
    assert "aidge-deploy-" not in docker_board.docker("ps", "-a").stdout


def test_redeploy_of_unchanged_export_uploads_nothing_and_does_not_rebuild(
    ssh_board: SshBoard, rpi_output: Any, tmp_path: Path
) -> None:
    export = private_copy(rpi_output, tmp_path)
    config = board_config(ssh_board)
    first_msgs, first_progress = progress_log()
    first = aidge_deploy.deploy(export, config, progress=first_progress)
    assert first.build is not None and first.build.status == BuildStatus.BUILT
    sent_first = [m for m in first_msgs if "upload:" in m]
    assert sent_first and " 0 file(s) sent" not in sent_first[0]
    again_msgs, again_progress = progress_log()
    again = aidge_deploy.deploy(export, config, progress=again_progress)
    assert again.build is not None and again.build.status == BuildStatus.CACHED
    assert any("upload: 0 file(s) sent (0 B)" in m for m in again_msgs), again_msgs
    assert not any(m.startswith("Build: uploaded ") for m in again_msgs)
    np.testing.assert_array_equal(again.output[0], first.output[0])  # type: ignore[index]
    # One changed file travels alone and the build is incremental (BUILT again).
    main = export / "main.cpp"
    main.write_text(main.read_text() + "\n// touched\n")
    changed_msgs, changed_progress = progress_log()
    changed = aidge_deploy.deploy(export, config, progress=changed_progress)
    assert any("upload: 1 file(s) sent" in m for m in changed_msgs), changed_msgs
    assert changed.build is not None and changed.build.status == BuildStatus.BUILT


@pytest.mark.aarch64
def test_aarch64_cross_build_runs_on_the_board_and_matches_host(
    aarch64_board: Aarch64Board, rpi_output: Any, host_outputs: list[np.ndarray], tmp_path: Path
) -> None:
    config = board_config(aarch64_board.ssh, cross_compile=True)
    result = aidge_deploy.deploy(rpi_output, config, work_dir=tmp_path / "run")
    assert result.build is not None
    header = result.build.artifact_path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF" and header[18:20] == b"\xb7\x00"  # EM_AARCH64
    # the run's metadata names the cross compiler that built it, with its version
    assert result.build.toolchain == Toolchain(("cmake", "aarch64-linux-gnu-g++"))
    versions = toolchain_versions(result.build.toolchain, emulated=False)
    assert "aarch64" in (versions["aarch64-linux-gnu-g++"] or "")
    assert any("local-cross" in n for n in result.metrics["notices"])
    assert isinstance(result.output, list)
    for got, want in zip(result.output, host_outputs, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    peak_rss_metric(result)  # the static aarch64 launcher ran on the board


# ----------------------------------------------------------------------------- connection errors


def test_wrong_key_is_an_authentication_error_with_hint(
    ssh_board: SshBoard, rpi_output: Any, tmp_path: Path
) -> None:
    other = tmp_path / "other_key"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(other))
    other.chmod(0o600)
    with pytest.raises(AuthenticationError) as info:
        aidge_deploy.deploy(rpi_output, board_config(ssh_board, ssh_key_path=other))
    assert "ssh-copy-id" in (info.value.hint or "")
    assert info.value.stage == "connect"


def test_unknown_and_changed_host_keys_are_refused(
    ssh_board: SshBoard, rpi_output: Any, tmp_path: Path
) -> None:
    empty = tmp_path / "known_hosts_empty"
    empty.write_text("")
    with pytest.raises(HostKeyError) as unknown:
        aidge_deploy.deploy(rpi_output, board_config(ssh_board, ssh_known_hosts_path=empty))
    assert unknown.value.hint
    forged = tmp_path / "known_hosts_forged"
    fake = asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh").decode()
    forged.write_text(f"[{ssh_board.host}]:{ssh_board.port} {' '.join(fake.split()[:2])}\n")
    with pytest.raises(HostKeyError) as changed:
        aidge_deploy.deploy(
            rpi_output,
            board_config(ssh_board, ssh_known_hosts_path=forged, trust_on_first_use=True),
        )
    assert "changed" in changed.value.message.lower() or "mismatch" in str(changed.value).lower()
    assert forged.read_text().count("\n") == 1  # never overwritten


def test_unreachable_board_times_out(netns_board: SshBoard, rpi_output: Any) -> None:
    config = board_config(netns_board, connect_timeout=1.0)
    with netns_board.black_hole():
        started = time.monotonic()
        with pytest.raises(ConnectError) as info:
            aidge_deploy.deploy(rpi_output, config)
    assert "timed out" in info.value.message
    assert time.monotonic() - started < 15


# ----------------------------------------------------------------------------- drops


def test_connection_dropped_mid_upload(
    fresh_ssh_board: SshBoard, rpi_output: Any, tmp_path: Path
) -> None:
    export = private_copy(rpi_output, tmp_path, "bigexport")
    for i in range(8):  # payload so that the upload lasts (not compiled: not a .cpp)
        (export / "data" / f"blob{i}.bin").write_bytes(os.urandom(2_000_000))
    killed = threading.Event()

    def kill_on_first_file(update: ProgressUpdate) -> None:
        if update.message.startswith("uploaded ") and not killed.is_set():
            killed.set()
            fresh_ssh_board.kill_sessions()

    config = board_config(fresh_ssh_board)
    with pytest.raises(TransferError) as info:
        aidge_deploy.deploy(export, config, progress=kill_on_first_file, work_dir=tmp_path / "r")
    assert killed.is_set()
    assert "Connection lost while uploading" in info.value.message
    assert info.value.stage == "transfer"
    assert (tmp_path / "r" / "remote.json").is_file()  # what was being done stays on disk
    # sshd reaps its killed session processes asynchronously: give it a moment
    deadline = time.monotonic() + 5.0
    while fresh_ssh_board.session_pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fresh_ssh_board.session_pids() == []
    # The next deploy completes the upload and leaves no partial file behind.
    messages, progress = progress_log()
    result = aidge_deploy.deploy(export, config, progress=progress)
    assert any(m.startswith("Build: upload: ") for m in messages)
    assert result.output is not None
    leftovers = fresh_ssh_board.run_as_user(
        f"find ~/.cache/aidge-deploy/exports/{export.name}-* -name '*.aidge-part'"
    )
    assert leftovers.stdout.strip() == ""


def test_connection_dropped_mid_run_keeps_the_log_and_leaves_nothing_running(
    fresh_ssh_board: SshBoard, rpi_output: Any, tmp_path: Path
) -> None:
    export = private_copy(rpi_output, tmp_path, "sleeper")
    patch_main(export, 'std::printf("started\\n"); std::fflush(stdout); sleep(40);')
    board = fresh_ssh_board
    stop = threading.Event()

    def killer() -> None:
        while not stop.is_set():
            if any("perf_run -- " in p for p in board_processes(board, export.name)):
                time.sleep(0.5)  # let "started" reach the client
                board.kill_sessions()
                return
            time.sleep(0.1)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        with pytest.raises(ExecutionError) as info:
            aidge_deploy.deploy(export, board_config(board), work_dir=tmp_path / "run")
    finally:
        stop.set()
        thread.join(timeout=10)
    assert "Connection lost" in info.value.message
    assert info.value.log_path == tmp_path / "run" / "run.log"
    assert "started" in info.value.log_path.read_text()
    deadline = time.monotonic() + 5
    while board_processes(board, export.name):
        assert time.monotonic() < deadline, board_processes(board, export.name)
        time.sleep(0.2)


# ----------------------------------------------------------------------------- board-side errors


@pytest.mark.docker
def test_missing_docker_image_on_the_board(docker_board: DockerBoard, rpi_output: Any) -> None:
    config = board_config(
        docker_board.ssh, backend="ssh_docker", docker_image="localhost/not-loaded:0"
    )
    with pytest.raises(PreflightError) as info:
        aidge_deploy.deploy(rpi_output, config)
    assert "not present" in info.value.message
    assert "docker save" in (info.value.hint or "") and "--docker-pull" in (info.value.hint or "")


@pytest.mark.docker
def test_container_exiting_non_zero_is_an_execution_error(
    docker_board: DockerBoard, rpi_output: Any, tmp_path: Path
) -> None:
    export = private_copy(rpi_output, tmp_path, "failing")
    patch_main(export, 'std::printf("about to fail\\n"); return 3;')
    config = board_config(docker_board.ssh, backend="ssh_docker", docker_image=docker_board.image)
    with pytest.raises(ExecutionError) as info:
        aidge_deploy.deploy(export, config, work_dir=tmp_path / "run")
    assert "exited with status 3" in info.value.message
    assert "in container" in info.value.message
    assert info.value.log_path is not None and "about to fail" in info.value.log_path.read_text()
    assert "aidge-deploy-" not in docker_board.docker("ps", "-a").stdout


def test_remote_folder_without_write_permission(
    ssh_board: SshBoard, rpi_output: Any, tmp_path: Path
) -> None:
    locked = f"/tmp/aidge-locked-{uuid.uuid4().hex[:6]}"
    os.mkdir(locked, 0o555)  # owned by root: the board user cannot write there
    try:
        with pytest.raises(TransferError) as info:
            aidge_deploy.deploy(
                rpi_output, board_config(ssh_board, ssh_remote_workdir=f"{locked}/work")
            )
    finally:
        os.rmdir(locked)
    if ssh_board.user == "root":  # pragma: no cover - root ignores permissions
        not_applicable("the board user is root")
    assert "Permission denied" in info.value.message
    assert "ls -ld" in (info.value.hint or "")


def test_user_workdir_is_removed_after_the_run_unless_kept(
    ssh_board: SshBoard, rpi_output: Any, tmp_path: Path
) -> None:
    workdir = f"scratch-{uuid.uuid4().hex[:6]}"
    result = aidge_deploy.deploy(rpi_output, board_config(ssh_board, ssh_remote_workdir=workdir))
    assert result.output is not None
    listing = ssh_board.run_as_user(f"ls -A ~/{workdir}/exports").stdout.split()
    assert listing == []
    kept = aidge_deploy.deploy(
        rpi_output, board_config(ssh_board, ssh_remote_workdir=workdir, keep_build_dir=True)
    )
    assert kept.output is not None
    assert len(ssh_board.run_as_user(f"ls -A ~/{workdir}/exports").stdout.split()) == 1
    ssh_board.run_as_user(f"rm -rf ~/{workdir}")


# ----------------------------------------------------------------------------- secrets


def test_no_secret_in_logs_results_or_errors(
    ssh_board: SshBoard,
    rpi_output: Any,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    passphrase = "tr0ub4dor-and-3-horses"
    password = "api-s3cret-do-not-print"
    encrypted = tmp_path / "id_encrypted"
    key = asyncssh.read_private_key(str(ssh_board.key_path))
    key.write_private_key(str(encrypted), passphrase=passphrase, rounds=64)
    key_lines = [
        line
        for path in (ssh_board.key_path, encrypted)
        for line in path.read_text().splitlines()
        if line and not line.startswith("-----")
    ]
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(PASSPHRASE_ENV, passphrase)
    config = board_config(ssh_board, ssh_key_path=encrypted, api_password=password)
    texts: list[str] = [repr(config)]
    messages, progress = progress_log()
    good = aidge_deploy.deploy(rpi_output, config, progress=progress, work_dir=tmp_path / "ok")
    texts += [repr(good), str(good.to_json()), good.log, *messages]
    monkeypatch.setenv(PASSPHRASE_ENV, "wrong-" + passphrase[::-1])
    with pytest.raises(DeployError) as info:
        aidge_deploy.deploy(rpi_output, config, work_dir=tmp_path / "bad")
    assert isinstance(info.value, AuthenticationError)
    texts += [str(info.value), repr(info.value)]
    texts += [r.getMessage() for r in caplog.records]
    for folder in (tmp_path / "ok", tmp_path / "bad"):
        texts += [p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file()]
    blob = "\n".join(texts)
    assert good.output is not None and len(blob) > 1000
    for secret in (passphrase, passphrase[::-1], password):
        assert secret not in blob
    for line in key_lines:
        assert line not in blob


def test_ssh_board_counts_software_events_and_reports_refusals(
    ssh_board: SshBoard, export_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """perf_event counters counted on the board by its launcher; refusals keep their reason."""
    artifact = export_factory("benchmark", target="raspberrypi", nb_iterations=5)
    config = board_config(ssh_board, counters=("task-clock", "page-faults", "instructions"))
    result = aidge_deploy.deploy(artifact, config, work_dir=tmp_path / "run")
    clock, faults = result.metric("task-clock"), result.metric("page-faults")
    assert clock is not None and clock.value is not None and clock.value > 0
    assert faults is not None and faults.value is not None and faults.value > 0
    assert clock.provenance == Provenance.SILICON and "per inference" in clock.description
    instructions = result.metric("instructions")
    assert instructions is not None
    supported = (
        subprocess.run(
            ["perf", "stat", "-e", "instructions", "true"],
            capture_output=True,
            text=True,
            check=False,
        )
        if shutil.which("perf")
        else None
    )
    if supported is None or "not supported" in supported.stderr or supported.returncode != 0:
        assert instructions.value is None and instructions.unavailable_reason


@pytest.mark.docker
def test_ssh_docker_counts_software_events_in_the_container(
    docker_board: DockerBoard, export_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """Docker's default seccomp profile refuses perf_event_open; counter passes run the
    container with our profile (package data), which allows it and stays a seccomp filter:
    software events are counted in the container, and nothing runs unconfined."""
    export = export_factory("benchmark", target="raspberrypi", nb_iterations=5)
    config = board_config(
        docker_board.ssh,
        backend="ssh_docker",
        docker_image=docker_board.image,
        counters=("task-clock", "page-faults"),
    )
    result = aidge_deploy.deploy(export, config, work_dir=tmp_path / "run")
    for name in ("task-clock", "page-faults"):
        metric = result.metric(name)
        assert metric is not None and metric.value is not None and metric.value > 0, metric
        assert "container" in metric.description
    assert result.log_path is not None
    logs = [p.read_text() for p in result.log_path.parent.rglob("*.log")]
    runs = [line for log in logs for line in log.splitlines() if line.startswith("# $ docker run")]
    assert runs and not any("unconfined" in line for line in runs)
    counted = [line for line in runs if "perf_run -e " in line]
    assert counted and all(
        re.search(rf"--security-opt seccomp=/\S+/{PROFILE_NAME} ", line) for line in counted
    )
    # the profile is a filter: the kernel reports seccomp mode 2 inside such a container
    status = docker_board.docker(
        "run", "--rm", "--network", "none", "--pull", "never",
        "--security-opt", f"seccomp={perf_profile()}",
        docker_board.image, "cat", "/proc/self/status",
    )  # fmt: skip
    assert status.returncode == 0, status.stderr
    assert re.search(r"^Seccomp:\s+2$", status.stdout, re.M), status.stdout


@pytest.mark.docker
def test_forced_container_build_without_a_compiler_is_a_build_error(
    docker_board: DockerBoard, rpi_output: Any, tmp_path: Path
) -> None:
    """--docker-build container in an image with no compiler: a typed build error."""
    config = board_config(docker_board.ssh, backend="ssh_docker", docker_image=docker_board.image)
    config = config.with_options(DockerOptions(image=docker_board.image, build="container"))
    with pytest.raises(BuildError) as info:
        aidge_deploy.deploy(private_copy(rpi_output, tmp_path), config, work_dir=tmp_path / "run")
    assert info.value.hint and info.value.log_path is not None and info.value.log_path.is_file()
    assert "aidge-deploy-" not in docker_board.docker("ps", "-a").stdout


def test_cli_run_and_profile_over_ssh(
    ssh_board: SshBoard, tiny_cnn: Path, rpi_output: Any, tmp_path: Path
) -> None:
    """The CLI's connection options (shared by run and profile) reach the board."""
    import json as _json

    from typer.testing import CliRunner

    from aidge_deploy.cli.main import app

    ssh = [
        "--backend", "ssh",
        "--ssh-host", ssh_board.host,
        "--ssh-port", str(ssh_board.port),
        "--ssh-user", ssh_board.user,
        "--ssh-key-path", str(ssh_board.key_path),
        "--ssh-known-hosts-path", str(ssh_board.known_hosts_path),
    ]  # fmt: skip
    runner = CliRunner()
    res = runner.invoke(
        app, ["run", str(rpi_output.path), "--target", "raspberrypi", "--json", *ssh]
    )
    assert res.exit_code == 0, res.output
    data = _json.loads(res.stdout[res.stdout.index("{") :])
    assert data["backend"] == "ssh" and data["output"] and len(data["output"][0]) == 10
    res = runner.invoke(
        app,
        ["profile", str(tiny_cnn), "--target", "raspberrypi", "--iterations", "3", "--json",
         "--work-dir", str(tmp_path / "w"), *ssh],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    data = _json.loads(res.stdout[res.stdout.index("{") :])
    assert data["backend"] == "ssh" and data["latency"]["n"] == 3 and len(data["layers"]) >= 3
