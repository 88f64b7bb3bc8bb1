"""Bad input is rejected before anything is exported or built: exit 2, a message, a hint.

Every check runs against a private cache folder, which must stay without exports, builds or
run folders afterwards. Also: ``--report`` checks (file, /proc, read-only, an existing bundle
without ``--overwrite``), results kept when the bundle fails after the run, one default
timeout, and ``aidge-deploy --help`` without ``aidge_core`` or matplotlib.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from aidge_deploy.cli.main import app
from envparts import needs

runner = CliRunner()


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("AIDGE_DEPLOY_CACHE_DIR", str(root))
    return root


def nothing_made(cache: Path) -> bool:
    """No export, build or run folder was created."""
    return not any((cache / sub).exists() and any((cache / sub).iterdir())
                   for sub in ("exports", "builds", "runs"))  # fmt: skip


def rejected(args: list[str], cache: Path, *expected: str) -> str:
    res = runner.invoke(app, args)
    out = flat(res.output)
    assert res.exit_code == 2, out
    assert "Traceback" not in res.output and "Hint:" in out, out
    for text in expected:
        assert text in out, (text, out)
    assert nothing_made(cache), "something was exported, built or run"
    return out


@pytest.fixture
def garbage(tmp_path: Path) -> Path:
    path = tmp_path / "garbage.onnx"
    path.write_bytes(b"\x08\x07this is not a protobuf\xff\xfe" * 10)
    return path


@contextlib.contextmanager
def read_only_folder(path: Path) -> Iterator[Path]:
    """A folder nobody can write into: a read-only tmpfs as root, else mode 0555."""
    path.mkdir()
    if os.geteuid() == 0:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(path)],
                       check=True, timeout=30)  # fmt: skip
        try:
            yield path
        finally:
            subprocess.run(["umount", str(path)], check=False, timeout=30)
    else:
        path.chmod(0o555)
        try:
            yield path
        finally:
            path.chmod(0o755)


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--warmup", "-1"], "--warmup must be 0 or more"),
        (["--iterations", "0"], "--iterations must be at least 1"),
        (["--timeout", "nan"], "--timeout must be a positive, finite number"),
        (["--timeout", "inf"], "--timeout must be a positive, finite number"),
        (["--timeout", "0"], "--timeout must be a positive, finite number"),
        (["--timeout", "-1"], "--timeout must be a positive, finite number"),
        (["--max-counters-per-pass", "0"], "--max-counters-per-pass must be an integer"),
        (["--ssh-port", "70000", "--backend", "ssh"], "--ssh-port must be a TCP port"),
        (["--dtype", "int4"], "Unknown dtype"),
        # Aidge's benchmark main keeps 8 B per iteration on its stack, the emulated boards'
        # entry 4 B in static RAM: past the stack (host) or the board's RAM, the program
        # would crash or fail to link after a full export and build
        (["--iterations", "30000000"], "more than this machine's stack limit"),
        (
            ["--iterations", "30000000", "--target", "mps2-an386"],
            "needs 120,000,000 B of timing arrays in the program's memory, more than the RAM "
            "of mps2-an386 (4,194,304 B)",
        ),
        (
            ["--iterations", "60000", "--target", "netduinoplus2"],
            "more than the RAM of netduinoplus2 (196,608 B)",
        ),
    ],
)
def test_bad_values_are_rejected_before_exporting(
    args: list[str], expected: str, tiny_cnn: Path, cache: Path
) -> None:
    rejected(["profile", str(tiny_cnn), *args], cache, expected)


@pytest.mark.parametrize("timeout", ["nan", "inf", "0", "-1"])
def test_run_rejects_bad_timeouts_before_building(
    timeout: str, tmp_path: Path, cache: Path
) -> None:
    export = tmp_path / "export"
    export.mkdir()
    rejected(["run", str(export), "--timeout", timeout], cache, "--timeout must be a positive")


def test_garbage_onnx_is_not_a_valid_model(garbage: Path, cache: Path) -> None:
    out = rejected(["profile", str(garbage)], cache, "is not a valid ONNX model")
    assert "operator" not in out and "DecodeError" not in out


def test_empty_onnx_is_not_a_valid_model(tmp_path: Path, cache: Path) -> None:
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    out = rejected(["profile", str(empty)], cache, "is not a valid ONNX model", "empty")
    assert "max()" not in out and "operator" not in out


def test_a_pipe_or_device_is_not_a_model_file(tmp_path: Path, cache: Path) -> None:
    fifo = tmp_path / "model.onnx"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/null")):
        out = rejected(["profile", str(path)], cache, "is not a regular file")
        assert "empty" not in out


def test_folder_and_file_mixups_say_which(tmp_path: Path, tiny_cnn: Path, cache: Path) -> None:
    rejected(["profile", str(tmp_path)], cache, "is a folder, not a model file")
    rejected(["run", str(tiny_cnn)], cache, "is a file, not a folder")
    rejected(["profile", str(tiny_cnn), "--work-dir", str(tiny_cnn)], cache,
             "--work-dir", "is a file, not a folder")  # fmt: skip
    rejected(["run", str(tmp_path / "missing")], cache, "does not exist")
    # a build folder that is a file: refused up front, not found out by the build after
    # exporting ("Unexpected error in stage Build ... likely a bug")
    rejected(["profile", str(tiny_cnn), "--build-dir", str(tiny_cnn)], cache,
             "--build-dir", "is a file, not a folder")  # fmt: skip
    export = tmp_path / "export"
    export.mkdir()
    rejected(["run", str(export), "--build-dir", str(tiny_cnn)], cache,
             "--build-dir", "is a file, not a folder")  # fmt: skip


def test_target_typo_suggests_the_target(tiny_cnn: Path, cache: Path) -> None:
    rejected(["profile", str(tiny_cnn), "--target", "mps2-an368"], cache,
             "Unknown target 'mps2-an368'", "Did you mean 'mps2-an386'")  # fmt: skip
    rejected(["profile", str(tiny_cnn), "--target", "rasberrypi"], cache,
             "Did you mean 'raspberrypi'")  # fmt: skip


def test_target_without_its_backend_or_connection_fails_before_exporting(
    tiny_cnn: Path, cache: Path
) -> None:
    rejected(["profile", str(tiny_cnn), "--target", "raspberrypi"], cache,
             "cannot be reached with backend 'local'", "--backend ssh")  # fmt: skip
    rejected(["profile", str(tiny_cnn), "--target", "raspberrypi", "--backend", "ssh"],
             cache, "host")  # fmt: skip


@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name
)
def test_a_signal_during_the_checks_says_interrupted_not_a_silent_kill(
    sig: signal.Signals, tiny_cnn: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stop signals are handled from the first check on (the checks import Aidge and
    read the model: seconds on a busy machine), not only once the run has started."""
    import aidge_deploy.modelexport as modelexport

    real = modelexport.check_onnx_model

    def signalled(model: Path, **kwargs: Any) -> None:
        os.kill(os.getpid(), sig)  # a real signal to this process, mid-check
        real(model, **kwargs)

    monkeypatch.setattr(modelexport, "check_onnx_model", signalled)
    before = signal.getsignal(sig)
    res = runner.invoke(app, ["profile", str(tiny_cnn)])
    out = flat(res.output)
    assert res.exit_code == 128 + sig, out
    assert f"Interrupted ({sig.name})" in out and "nothing was exported, built or run" in out
    assert nothing_made(cache)
    assert signal.getsignal(sig) is before, "the previous handler is back"


# --------------------------------------------------------------------------- --report


def test_report_checks_before_the_run(tiny_cnn: Path, tmp_path: Path, cache: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    rejected(["profile", str(tiny_cnn), "--report", str(a_file)], cache, "is a file, not a folder")
    rejected(["profile", str(tiny_cnn), "--report", str(a_file / "sub")], cache,
             "is a file, not a folder")  # fmt: skip
    rejected(["profile", str(tiny_cnn), "--report", "/proc/aidge-report"], cache,
             "cannot create the result bundle under /proc")  # fmt: skip
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("precious")
    rejected(["profile", str(tiny_cnn), "--report", str(mine)], cache, "not a result bundle")
    assert (mine / "notes.txt").read_text() == "precious"
    with read_only_folder(tmp_path / "ro") as ro:
        out = rejected(["profile", str(tiny_cnn), "--report", str(ro / "bundle")], cache)
        assert "read-only" in out or "permission denied" in out, out


def test_report_check_also_guards_run(tmp_path: Path, cache: Path) -> None:
    export = tmp_path / "export"
    export.mkdir()
    rejected(["run", str(export), "--report", "/proc/x"], cache, "/proc")


@pytest.mark.slow
def test_existing_bundle_is_refused_without_overwrite(
    tiny_cnn: Path, tmp_path: Path, cache: Path
) -> None:
    out = tmp_path / "bundle"
    args = ["profile", str(tiny_cnn), "--iterations", "3", "--report", str(out)]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    manifest = (out / "manifest.json").read_bytes()
    runs = sorted((cache / "runs").iterdir())
    again = runner.invoke(app, args)
    assert again.exit_code == 2 and "already holds a result bundle" in flat(again.output)
    assert "--overwrite" in flat(again.output)
    assert sorted((cache / "runs").iterdir()) == runs, "nothing ran"
    assert (out / "manifest.json").read_bytes() == manifest
    replaced = runner.invoke(app, [*args, "--overwrite"])
    assert replaced.exit_code == 0, replaced.output
    assert (out / "manifest.json").read_bytes() != manifest


@pytest.mark.slow
def test_bundle_failing_after_the_run_keeps_the_results(
    export_factory: Any, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder passed the check, then became unwritable: the figures are still printed, the
    error is typed (no "likely a bug") and names the run's log."""
    import aidge_deploy.pipeline.stages.report as report_stage

    real = report_stage.write_bundle

    def after_the_run(out_dir: Path, *args: Any, **kwargs: Any) -> Any:
        with read_only_folder(tmp_path / "ro") as ro:  # the disk went read-only meanwhile
            return real(ro / "bundle", *args, **kwargs)

    monkeypatch.setattr(report_stage, "write_bundle", after_the_run)
    res = runner.invoke(
        app, ["run", str(export_factory("benchmark").path), "--report", str(tmp_path / "out")]
    )
    out = flat(res.output)
    assert res.exit_code == 2, out
    assert "Latency per inference" in out, "the results are printed anyway"
    assert "Could not create the result bundle" in out or "Could not write" in out
    assert "read-only" in out or "permission denied" in out
    assert "likely a bug" not in out and "Log:" in out and "run.log" in out


def test_report_errors_are_typed_with_errno_words() -> None:
    from aidge_deploy.report.destination import describe_os_error

    assert "read-only" in describe_os_error(OSError(errno.EROFS, "Read-only file system"))
    assert "EACCES" in describe_os_error(OSError(errno.EACCES, "Permission denied"))


# --------------------------------------------------------------------------- defaults, help


def test_run_and_profile_share_one_default_timeout() -> None:
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.defaults import DEFAULT_RUN_TIMEOUT_S

    assert DeployConfig().run_timeout == DEFAULT_RUN_TIMEOUT_S
    for command in ("run", "profile"):
        res = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
        assert res.exit_code == 0
        assert f"default: {DEFAULT_RUN_TIMEOUT_S:g}" in flat(res.output).replace(".0]", "]")


#: what ``--help`` must not import: Aidge and the heavy libraries, and the package's own
#: run-time code (the pipeline and its stages, results, power, the report writers, the farm)
HEAVY_AT_HELP = (
    "aidge_core", "matplotlib", "numpy", "onnx", "jsonschema", "elftools", "asyncssh",
    "fastapi", "sqlalchemy", "labgrid", "serial", "jinja2",
    "aidge_deploy.api", "aidge_deploy.pipeline", "aidge_deploy.results", "aidge_deploy.power",
    "aidge_deploy.farm", "aidge_deploy.report.bundle", "aidge_deploy.report.html",
    "aidge_deploy.report.power_html", "aidge_deploy.report.schemas",
)  # fmt: skip


def imported_after(argv: list[str], heavy: tuple[str, ...], env: dict[str, str] | None = None
                   ) -> tuple[list[str], subprocess.CompletedProcess[str]]:  # fmt: skip
    """Run ``aidge-deploy *argv`` in a fresh interpreter; the modules of ``heavy`` (or their
    submodules) it imported by the end, and the finished process (its stdout ends with them)."""
    probe = (
        "import sys\n"
        "from aidge_deploy.cli.main import app\n"
        "code = 0\n"
        "try:\n"
        f"    app({argv!r})\n"
        "except SystemExit as exc:\n"
        "    code = exc.code or 0\n"
        f"HEAVY = {heavy!r}\n"
        "heavy = sorted(m for m in sys.modules if m in HEAVY or m.startswith("
        "tuple(h + '.' for h in HEAVY)))\n"
        "print('\\nHEAVY', ','.join(heavy))\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=600, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith("HEAVY"), done.stdout[-2000:]
    return [m for m in line[6:].split(",") if m], done


def test_help_does_not_import_aidge_core_or_matplotlib() -> None:
    for args in ([], ["run"], ["profile"], ["compare"], ["targets"], ["farm"], ["doctor"]):
        heavy, _ = imported_after([*args, "--help"], HEAVY_AT_HELP)
        assert not heavy, f"aidge-deploy {' '.join(args)} --help imports {','.join(heavy)}"


#: what a ``profile`` of an unchanged model must not import: its export is on disk and its
#: build cached, so Aidge (the exporter, the hardware model, their matplotlib) is not needed,
#: nor onnx (bytes that were exported before are not parsed again)
HEAVY_WHEN_CACHED = (
    "aidge_core", "aidge_onnx", "aidge_backend_cpu", "aidge_export_cpp", "aidge_quantization",
    "matplotlib", "onnx",
)  # fmt: skip


def profile_twice(model: Path, cache: Path, target: str, program: str, heavy: tuple[str, ...]
                  ) -> tuple[list[str], list[dict[str, Any]]]:  # fmt: skip
    """``profile MODEL --target TARGET --report DIR`` twice with an empty cache, each in a
    fresh interpreter: the first exports with Aidge and builds ``program`` (a glob in the
    build cache), the second reuses both (checked) and writes the same hardware facts in its
    bundle. What the second imported of ``heavy``, and the two runs' ``--json`` results."""
    argv = ["profile", str(model), "--target", target, "--iterations", "3", "--json"]
    env = {**os.environ, "AIDGE_DEPLOY_CACHE_DIR": str(cache), "COLUMNS": "200"}
    reports = [cache / "report-1", cache / "report-2"]
    first_heavy, first = imported_after([*argv, "--report", str(reports[0])], heavy, env)
    assert "aidge_core" in first_heavy, "the first run exports with Aidge (the probe sees it)"
    (built,) = (cache / "builds").glob(program)
    mtime = built.stat().st_mtime_ns
    second_heavy, second = imported_after([*argv, "--report", str(reports[1])], heavy, env)
    assert "reused" in second.stderr, second.stderr[-2000:]
    assert list((cache / "builds").glob(program)) == [built]
    assert built.stat().st_mtime_ns == mtime, "not rebuilt"
    hardware = [
        json.loads((r / "run_metadata.json").read_text())["target"]["hardware"] for r in reports
    ]
    assert hardware[0]["class"] and hardware[1] == hardware[0]
    runs = [json.loads(done.stdout[: done.stdout.rindex("HEAVY")]) for done in (first, second)]
    return second_heavy, runs


@pytest.mark.slow
def test_cached_profile_does_not_import_aidge_core_or_matplotlib(
    tiny_cnn: Path, cache: Path
) -> None:
    """The second ``profile`` of an unchanged model on the host reads its export's manifest
    and reuses its build: importing Aidge would cost more than the whole run."""
    heavy, runs = profile_twice(tiny_cnn, cache, "host", "*/run_export", HEAVY_WHEN_CACHED)
    assert runs[1]["latency"]["n"] == 3 and len(runs[1]["layers"]) >= 3
    assert not heavy, f"a cached profile imports {','.join(heavy)}"


@pytest.mark.slow
@pytest.mark.qemu
@needs(all(shutil.which(t) for t in ("qemu-system-arm", "arm-none-eabi-gcc", "make")),
       "qemu-system-arm, arm-none-eabi-gcc or make is not installed")  # fmt: skip
def test_cached_emulated_profile_does_not_import_aidge_core_and_keeps_its_figures(
    tiny_cnn: Path, cache: Path
) -> None:
    """The same on an emulated board: the second run reads the board's clock and memories
    from its descriptor (not from the hardware model the plug-in registers with Aidge), nor
    imports the SSH boards' asyncssh, and reports the same flash, RAM, clock and
    instruction counts as the first (those facts equal the hardware model's:
    ``test_qemu_boards.py::test_deploy_target_reads_the_hardware_model_facts_from_the_descriptor``)."""
    also = ("aidge_qemu_boards", "aidge_export_arm_cortexm", "asyncssh")
    heavy, runs = profile_twice(
        tiny_cnn, cache, "mps2-an386", "*/bin/*.elf", (*HEAVY_WHEN_CACHED, *also)
    )
    assert not heavy, f"a cached emulated profile imports {','.join(heavy)}"
    for key in ("flash_bytes", "ram_bytes", "flash_capacity", "ram_capacity"):
        assert runs[1]["binary"][key] == runs[0]["binary"][key] > 0, key
    assert runs[0]["binary"]["ram_capacity"] == 4 << 20  # the board's 4 MiB SSRAM
    assert runs[1]["timing"] == runs[0]["timing"]
    assert runs[0]["timing"]["clock_hz"] == 25e6
    assert runs[1]["timings_ms"] == runs[0]["timings_ms"]  # icount: deterministic
    assert runs[1]["measurements"] == runs[0]["measurements"]


def test_no_command_takes_a_secret_as_an_option() -> None:
    """A command line is readable by every user (``ps``, /proc/*/cmdline): passwords,
    passphrases and tokens come from the environment, a file or a hidden prompt, never an
    option's value (``--token-file PATH`` names a file, ``TOKEN_ID`` a record: allowed)."""
    import click
    import typer.main

    def walk(command: click.Command, path: str) -> Iterator[tuple[str, str]]:
        for param in command.params:
            for name in param.opts:
                yield path, name
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, f"{path} {name}")

    options = list(walk(typer.main.get_command(app), "aidge-deploy"))
    assert len(options) > 50, "the walk saw the commands"
    secret = re.compile(r"passw|passphrase|secret|token|api-?key|credential", re.IGNORECASE)
    named_secrets = [
        f"{path} {name}"
        for path, name in options
        if secret.search(name) and not name.endswith(("-file", "-path", "-id", "_id"))
    ]
    assert named_secrets == []


# --------------------------------------------------------------------------- 80 columns


def narrow(*args: str, cache: Path | None = None) -> str:
    """``aidge-deploy ARGS`` in its own process on an 80-column terminal; its stdout."""
    env = {**os.environ, "COLUMNS": "80", "LINES": "50"}
    if cache is not None:
        env["AIDGE_DEPLOY_CACHE_DIR"] = str(cache)
    done = subprocess.run([sys.executable, "-m", "aidge_deploy.cli.main", *args],
                          capture_output=True, text=True, env=env, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for line in done.stdout.splitlines():
        # paths are never broken over lines (they must stay copyable)
        if not line.lstrip().startswith(("Export:", "Log:", "Report:")):
            assert len(line) <= 80, f"wider than 80 columns: {line!r}"
    return done.stdout


def test_targets_shows_full_names_at_80_columns() -> None:
    from aidge_deploy.registry import registered_targets

    out = narrow("targets")
    assert "…" not in out
    first_cells = {line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│")}
    for target, backend in registered_targets():
        assert target in first_cells, f"{target} is not shown in full"
        assert backend in out


@pytest.mark.parametrize("command", ["run", "profile"])
def test_help_shows_full_option_names_at_80_columns(command: str) -> None:
    import typer.main

    from aidge_deploy.cli.main import app

    out = narrow(command, "--help")
    click_command = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    for param in click_command.params:
        for name in param.opts:
            if name.startswith("--"):
                assert re.search(rf"(^|[\s,]){re.escape(name)}([\s,/]|$)", out, re.M), name
    assert "…" not in out


@pytest.mark.slow
@pytest.mark.qemu
def test_per_layer_table_with_counters_stays_legible_at_80_columns(
    tiny_cnn: Path, tmp_path: Path
) -> None:
    out = narrow("profile", str(tiny_cnn), "--target", "mps2-an386", "--iterations", "3",
                 "--counters", "emulated", cache=tmp_path / "cache")  # fmt: skip
    tables = out.split("Per-layer profile")[1:]
    assert len(tables) >= 2, "the counters continue in a second table rather than wrap"
    for table in tables:
        rows = [line for line in table.splitlines() if line.startswith("│")]
        names = [row.split("│")[1].strip() for row in rows]
        assert names[:4] == ["_0_PadConvAct_0", "_1_Transpose_0", "_2_Reshape_0", "_3_FC_0"]
        assert all("…" not in row for row in rows)
    for word in ("loads", "stores", "branches-", "taken"):  # emu-loads etc., one part per line
        assert re.search(rf"┃ +{word} ┃", out), word


@pytest.mark.slow
def test_failed_preflight_leaves_no_empty_run_folder(
    export_factory: Any, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import aidge_deploy
    from aidge_deploy.errors import ConfigError

    export = export_factory("benchmark").path
    res = runner.invoke(app, ["run", str(export), "--counters", "task-clok"])
    assert res.exit_code == 2 and "Did you mean 'task-clock'" in flat(res.output)
    with pytest.raises(ConfigError):
        aidge_deploy.deploy(export, aidge_deploy.DeployConfig(target="mps2-an386"))
    runs = cache / "runs"
    assert not runs.exists() or list(runs.iterdir()) == [], "a failed Preflight left a run folder"
