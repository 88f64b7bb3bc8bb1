"""deploy() on emulated Cortex-M boards: real Aidge MCU exports, cross-built, flashed into QEMU.

Every count here is labelled emulated (QEMU counts instructions) and every time estimated
(the core's timing model's cycles ÷ the core clock).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import aidge_deploy
import modelzoo
from aidge_deploy.backendoptions import QemuOptions
from aidge_deploy.cli.main import app
from aidge_deploy.config import DeployConfig, ValidationConfig
from aidge_deploy.errors import (
    CaptureError,
    FlashError,
    MemoryFitError,
    PreflightError,
    ProtocolError,
)
from aidge_deploy.progress import ProgressKind, ProgressUpdate
from aidge_deploy.results import Provenance
from envparts import needs

pytestmark = [
    pytest.mark.qemu,
    pytest.mark.slow,
    needs(shutil.which("qemu-system-arm") is not None, "qemu-system-arm is not installed"),
    needs(
        shutil.which("arm-none-eabi-g++") is not None, "the Arm cross toolchain is not installed"
    ),
]

BOARDS = ("mps2-an386", "mps3-an547", "netduinoplus2")


def _our_qemus() -> set[int]:
    """QEMU processes started by this test process (other workers' boards do not count)."""
    out = subprocess.run(
        ["pgrep", "-P", str(os.getpid()), "-f", "qemu-system-arm"], capture_output=True, text=True
    )
    return {int(p) for p in out.stdout.split()}


@pytest.fixture
def no_qemu_left():  # type: ignore[no-untyped-def]
    yield
    assert not _our_qemus(), "a QEMU process outlived the deploy"


@pytest.mark.parametrize("board", BOARDS)
def test_output_matches_onnxruntime(
    board: str, export_factory, tiny_cnn: Path, tiny_input: np.ndarray, no_qemu_left
) -> None:  # type: ignore[no-untyped-def]
    result = aidge_deploy.deploy(export_factory("output", target=board), DeployConfig())
    expected = modelzoo.onnx_reference(tiny_cnn, tiny_input).reshape(-1)
    assert isinstance(result.output, list) and len(result.output) == 1
    # the UART prints %f (6 decimals): compare at that precision
    np.testing.assert_allclose(result.output[0], expected, atol=2e-6, rtol=1e-5)


@pytest.fixture(scope="module")
def int8_mlp(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, Path]:
    """An int8 export of a two-head MLP (the int8 model Aidge 0.10.1 exports right: its int8
    conv exports give outputs unrelated to the float model, see test_validate), on an input
    in [-1, 1] (the int8 export scales inputs by 127)."""
    root = tmp_path_factory.mktemp("int8")
    model = modelzoo.two_head_mlp(root / "mlp.onnx", seed=11)
    x = np.random.default_rng(5).uniform(-1.0, 1.0, (1, 16)).astype(np.float32)
    return model, x, root


@pytest.mark.parametrize("board", BOARDS)
def test_int8_output_within_host_quantisation_error(
    board: str, int8_mlp: tuple[Path, np.ndarray, Path]
) -> None:
    """The board's int8 integers are the host's (same kernels, integer arithmetic), and both,
    read in quantisation steps, are the float model's outputs within the validation
    tolerance: an output off by more than a few steps fails (``check_output``'s verdict,
    unit-tested in test_validate)."""
    from aidge_deploy.validation.matrix import check_output, tolerance_for
    from conftest import export_with_aidge

    model, x, root = int8_mlp

    def run(target: str) -> list[np.ndarray]:
        out = root / f"{target}_output"
        # the host export is made once and deployed again for each board's case
        artifact = (
            str(out)
            if out.exists()
            else export_with_aidge(model, out, target=target, kind="output", dtype="int8", x=x)
        )
        result = aidge_deploy.deploy(artifact, DeployConfig())
        assert isinstance(result.output, list) and len(result.output) == 2
        return [np.asarray(o).reshape(-1) for o in result.output]

    host, mcu = run("host"), run(board)
    import onnxruntime as ort

    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    reference = [np.asarray(r).reshape(-1) for r in session.run(None, {"x": x})]
    for name, h, m, want in zip(("logits", "aux"), host, mcu, reference, strict=True):
        np.testing.assert_array_equal(m, h, err_msg=f"{board} vs host, output {name}")
        # int8 codes: an export made by Aidge directly records no scale (aidge-deploy's own
        # exports do, and their outputs come dequantised): read at the reference's step
        assert np.all(np.abs(h) <= 128) and np.any(h != 0), h
        tolerance = tolerance_for("int8_t", [want])
        assert tolerance.step is not None
        check = check_output(board, name, [m * tolerance.step], [want], tolerance)
        assert check.passed and check.top1_agreement == 1.0, check
        assert check.max_abs_error <= 4 * tolerance.step + 0.1 * np.abs(want).max(), check


def test_benchmark_is_emulated_and_deterministic(export_factory, no_qemu_left) -> None:  # type: ignore[no-untyped-def]
    artifact = export_factory("benchmark", target="mps2-an386", nb_iterations=4)
    first = aidge_deploy.deploy(artifact, DeployConfig())
    second = aidge_deploy.deploy(artifact, DeployConfig())
    assert first.timings is not None and len(first.timings) == 4
    assert first.metrics["cycles_name"] == "emulated_instructions"
    assert first.metrics["cycles_unit"] == "instructions"
    assert first.metrics["provenance"] == "emulated"
    assert first.metrics["cycles"] == second.metrics["cycles"], "icount makes counts deterministic"
    assert [layer.counters for layer in first.layers] == [layer.counters for layer in second.layers]
    metric = first.metric("emulated_instructions")
    assert (
        metric is not None
        and metric.provenance == Provenance.EMULATED
        and metric.unit == "instructions"
    )
    # a time on an emulated board is an estimate from its instruction count, never emulated
    assert all(
        m.provenance == Provenance.ESTIMATED
        and "estimated (M4 timing model) at 25 MHz" in m.description
        for m in first.measurements
        if m.name.startswith("latency")
    )
    assert first.metrics["binary"]["flash_bytes"] > 0 and first.metrics["binary"]["ram_bytes"] > 0
    assert (Path(artifact.path) / "export_log.log").is_file(), (
        "the exporter's charts read the build log there"
    )


def _qemu_command_lines() -> dict[int, str]:
    lines = {}
    for pid in _our_qemus():
        with contextlib.suppress(OSError):
            lines[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return lines


def test_qemu_starts_before_the_build_and_is_the_one_flashed(export_factory, no_qemu_left) -> None:  # type: ignore[no-untyped-def]
    """The board's QEMU is launched (halted) by Prepare, so its start-up overlaps the build
    (cache check) instead of following it; the Flash stage programs that same QEMU, whose
    timing-model plugin got its snapshot addresses from a file written at flash time."""
    artifact = export_factory("benchmark", target="mps2-an386", nb_iterations=2)
    seen: dict[str, dict[int, str]] = {}

    def watch(update: ProgressUpdate) -> None:
        if update.kind is ProgressKind.START and update.stage in ("Build", "Execute"):
            seen[update.stage] = _qemu_command_lines()

    result = aidge_deploy.deploy(artifact, DeployConfig(), progress=watch)
    assert len(seen["Build"]) == 1, seen
    assert seen["Execute"] == seen["Build"], "Flash must program the QEMU Prepare started"
    (command,) = seen["Build"].values()
    assert "boundaries=" in command and "boundary=" not in command
    assert result.metrics.get("estimated_cycles"), "the model ran with the late addresses"
    assert result.log_path is not None
    assert (result.log_path.parent / "timing.boundaries").read_text().count("0x") >= 2


def test_firmware_the_model_cannot_time_runs_on_a_qemu_without_the_plugin(
    export_factory, monkeypatch, no_qemu_left
) -> None:  # type: ignore[no-untyped-def]
    """When the firmware turns out not to be timeable (its reason is reported), its run has
    no plugin: the QEMU Prepare started with one before the build is replaced by one
    without it, and when the firmware is already built Prepare starts that QEMU at once.
    The run is not slowed by a model whose figures would be thrown away."""
    from aidge_deploy.boards.baremetal.qemu import estimate
    from aidge_deploy.boards.baremetal.qemu.targets import QemuBoardTarget

    artifact = export_factory("benchmark", target="mps2-an386", nb_iterations=2)
    reason = "the firmware predates the emulated boards' benchmark entry (re-export the model)"
    monkeypatch.setattr(
        estimate.TimingPlan, "bind", lambda plan, firmware: estimate.unavailable(plan.model, reason)
    )
    seen: dict[str, dict[int, str]] = {}

    def watch(update: ProgressUpdate) -> None:
        if update.kind is ProgressKind.START and update.stage in ("Build", "Execute"):
            seen[update.stage] = _qemu_command_lines()

    warm = QemuBoardTarget.cached_build
    for cached in (False, True):
        monkeypatch.setattr(
            QemuBoardTarget, "cached_build", warm if cached else lambda self, ctx: None
        )
        result = aidge_deploy.deploy(artifact, DeployConfig(), progress=watch)
        (early,) = seen["Build"].values()
        (flashed,) = seen["Execute"].values()
        assert "-plugin" not in flashed
        assert ("-plugin" in early) is not cached
        assert result.metrics["estimated_cycles"] is None
        assert result.metrics["timing_model"]["unavailable"] == reason
        assert result.timings is not None and len(result.timings) == 2  # CPI = 1 times instead


def test_a_built_firmware_is_loaded_by_qemu_itself_not_over_rsp(
    export_factory, monkeypatch, no_qemu_left
) -> None:  # type: ignore[no-untyped-def]
    """With the build in the cache, Prepare's QEMU loads that firmware itself (``-kernel``,
    as a bare run does) and Flash only points the core at it, instead of writing 30 KB of
    hex through QEMU's stub. When that fails (QEMU refused the file, or it was rebuilt in
    between), the firmware is programmed over RSP into a new QEMU, whose errors say why."""
    from aidge_deploy.connections.qemu import FirmwareSession
    from aidge_deploy.errors import FlashError

    artifact = export_factory("benchmark", target="mps2-an386", nb_iterations=2)
    first = aidge_deploy.deploy(artifact, DeployConfig())  # builds, or finds the build
    reports: list = []  # type: ignore[type-arg]
    flash = FirmwareSession.flash

    def spy(self, image, **kwargs):  # type: ignore[no-untyped-def]
        reports.append(flash(self, image, **kwargs))
        return reports[-1]

    seen: dict[str, dict[int, str]] = {}

    def watch(update: ProgressUpdate) -> None:
        if update.kind is ProgressKind.START and update.stage in ("Build", "Execute"):
            seen[update.stage] = _qemu_command_lines()

    monkeypatch.setattr(FirmwareSession, "flash", spy)
    warm = aidge_deploy.deploy(artifact, DeployConfig(), progress=watch)
    assert warm.build is not None and warm.build.status == "cached"
    (command,) = seen["Build"].values()
    assert f"-kernel {warm.build.artifact_path}" in command
    assert seen["Execute"] == seen["Build"], "Flash must verify the QEMU Prepare started"
    assert [(r.preloaded, r.verified, r.bytes_written) for r in reports] == [(True, False, 0)]
    assert warm.metrics["estimated_cycles"] == first.metrics["estimated_cycles"]
    assert warm.timings == first.timings

    def refused(self, image, **kwargs):  # type: ignore[no-untyped-def]
        if self.machine.kernel is not None:
            raise FlashError(f"{image.path} changed since QEMU loaded it (test)")
        return spy(self, image, **kwargs)

    reports.clear()
    monkeypatch.setattr(FirmwareSession, "flash", refused)
    again = aidge_deploy.deploy(artifact, DeployConfig(), progress=watch)
    (early,) = seen["Build"].values()
    (flashed,) = seen["Execute"].values()
    assert "-kernel" in early and "-kernel" not in flashed
    assert [(r.preloaded, r.verified) for r in reports] == [(False, True)]
    assert reports[0].bytes_written > 0
    assert again.metrics["estimated_cycles"] == first.metrics["estimated_cycles"]


def test_validation_on_target_gives_accuracy(
    export_factory, tmp_path: Path, tiny_cnn: Path
) -> None:  # type: ignore[no-untyped-def]
    artifact = export_factory(
        "validation",
        target="mps2-an386",
        nb_iterations=2,
        validation=True,
        nb_validation_iterations=4,
    )
    samples = [
        modelzoo.sample_input((1, 3, 4, 4), seed=s) for s in range(4)
    ]  # reference (NCHW) layout
    predicted = [int(np.argmax(modelzoo.onnx_reference(tiny_cnn, s))) for s in samples]
    labels = [*predicted[:3], (predicted[3] + 1) % 10]  # three right, one wrong
    cfg = DeployConfig(
        validation=ValidationConfig(samples=samples, labels=labels, validation_on_target=True)
    )
    result = aidge_deploy.deploy(artifact, cfg)
    assert result.metrics["predictions"] == predicted
    assert result.accuracy == pytest.approx(0.75)
    assert isinstance(result.output, dict) and result.output["accuracy"] == pytest.approx(0.75)
    assert result.timings is not None and len(result.timings) == 2


def test_mlperf_tiny_session_returns_results_and_stops_the_board(
    export_factory, no_qemu_left
) -> None:  # type: ignore[no-untyped-def]
    artifact = export_factory(
        "benchmark", target="mps2-an386", nb_iterations=3, tinymlbenchmark=True
    )
    assert artifact.manifest.protocol == "mlperf-tiny-uart/v1"
    image = np.random.default_rng(0).integers(0, 255, (1, 3, 4, 4)).astype(np.float32)
    result = aidge_deploy.deploy(
        artifact, DeployConfig(validation=ValidationConfig(samples=[image]))
    )
    mlperf = result.metrics["mlperf"]
    assert mlperf.nb_inferences == 3 and len(mlperf.results) == 10
    assert sum(mlperf.results) == pytest.approx(1.0, abs=0.02)
    # one mean over 3 inferences: a figure, not a one-sample latency series
    assert result.timings is None and result.output["timings"] == []  # type: ignore[index]
    latency = result.metric("mlperf_latency")
    assert latency is not None and latency.provenance == Provenance.ESTIMATED
    assert latency.value and latency.resolution and "mean of 3 inferences" in latency.description


@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_profile_cli_prints_emulated_per_layer_figures(
    board: str, dtype: str, tiny_cnn: Path, tmp_path: Path
) -> None:
    res = CliRunner().invoke(
        app,
        [
            "profile",
            str(tiny_cnn),
            "--target",
            board,
            "--dtype",
            dtype,
            "--iterations",
            "3",
            "--work-dir",
            str(tmp_path / "w"),
        ],
    )
    out = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "Per-layer profile" in out and "emulated instructions" in out
    assert "EMULATED" in out and "not cycles" in out and "timing model) at" in out
    assert "estimated cycles" in out


def test_never_ending_firmware_times_out_stops_qemu_and_keeps_log(
    export_factory, tmp_path: Path, no_qemu_left
) -> None:  # type: ignore[no-untyped-def]
    export_dir = tmp_path / "hang"
    shutil.copytree(
        export_factory("benchmark", target="mps2-an386", nb_iterations=2).path, export_dir
    )
    main = export_dir / "main.cpp"
    text = main.read_text()
    # hang right after the inference output, before the END DEMO banner
    patched, n = re.subn(
        r"(int main\s*\([^)]*\)\s*\{)",
        r'\1\n    printf("about to hang\\r\\n"); for (;;) { __asm volatile("nop"); }',
        text,
        count=1,
    )
    assert n == 1
    main.write_text(patched)
    with pytest.raises(CaptureError) as info:
        aidge_deploy.deploy(export_dir, DeployConfig(uart_capture_duration=2.0))
    assert info.value.log_path is not None and "about to hang" in info.value.log_path.read_text(
        errors="replace"
    )
    assert info.value.hint


def test_garbage_on_the_uart_is_a_protocol_error(
    export_factory, tmp_path: Path, no_qemu_left
) -> None:  # type: ignore[no-untyped-def]
    export_dir = tmp_path / "garbage"
    shutil.copytree(
        export_factory("benchmark", target="mps2-an386", nb_iterations=2).path, export_dir
    )
    main = export_dir / "main.cpp"
    patched, n = re.subn(
        r"(int main\s*\([^)]*\)\s*\{)",
        r'\1\n    printf("inference_time: 0.5 $#!garbage 0.7 \\n\\r");',
        main.read_text(),
        count=1,
    )
    assert n == 1
    main.write_text(patched)
    with pytest.raises(ProtocolError) as info:
        aidge_deploy.deploy(export_dir, DeployConfig())
    assert "garbage" in info.value.message and info.value.log_path is not None


def test_model_too_large_for_192k_ram_fails_before_flashing(
    tmp_path: Path, tiny_input: np.ndarray
) -> None:
    from conftest import export_with_aidge

    model = modelzoo.wide_conv(tmp_path / "wide.onnx", channels=4, size=54)
    x = modelzoo.sample_input((1, 4, 54, 54))
    artifact = export_with_aidge(
        model,
        tmp_path / "export",
        target="netduinoplus2",
        kind="benchmark",
        dtype="float32",
        x=x,
        nb_iterations=2,
    )
    with pytest.raises(MemoryFitError) as info:
        aidge_deploy.deploy(artifact, DeployConfig())
    assert "RAM" in info.value.message and "nothing was flashed" in (info.value.hint or "")
    assert info.value.stage == "Build" and info.value.log_path is not None


def test_flash_verification_failure_outside_flash(
    export_factory, tmp_path: Path, no_qemu_left
) -> None:  # type: ignore[no-untyped-def]
    export_dir = tmp_path / "badaddr"
    shutil.copytree(
        export_factory("benchmark", target="mps2-an386", nb_iterations=2).path, export_dir
    )
    memory_ld = next(export_dir.rglob("memory.ld"))
    text = memory_ld.read_text()
    # move the code region where the MPS2 machine has no memory
    patched = re.sub(
        r"(FLASH\s*\([^)]*\)\s*:\s*ORIGIN\s*=\s*)0x[0-9A-Fa-f]+", r"\g<1>0x30000000", text, count=1
    )
    assert patched != text
    memory_ld.write_text(patched)
    with pytest.raises(FlashError) as info:
        aidge_deploy.deploy(export_dir, DeployConfig())
    assert "0x3000" in info.value.message.lower() or "0x3000" in (info.value.hint or "").lower()
    assert info.value.stage == "Flash"


def test_qemu_missing_is_a_preflight_error_and_doctor_says_so(
    export_factory, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("make", "arm-none-eabi-gcc", "arm-none-eabi-g++", "cmake", "c++"):
        path = shutil.which(tool)
        if path:
            os.symlink(path, bin_dir / tool)
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(PreflightError) as info:
        aidge_deploy.deploy(
            export_factory("benchmark", target="mps2-an386", nb_iterations=2), DeployConfig()
        )
    assert "qemu-system-arm" in info.value.message and "apt-get install" in (info.value.hint or "")
    from aidge_deploy.checkup import target_readiness

    checks = [c for row in target_readiness() for c in row.checks if c.name == "qemu-system-arm"]
    assert checks and not any(c.ok for c in checks)
    assert all(c.hint == "apt-get install --no-install-recommends qemu-system-arm" for c in checks)
    res = CliRunner().invoke(app, ["doctor"])
    assert res.exit_code == 1 and "qemu-system-arm" in res.output


def test_profile_1600_iterations_runs_1600_inferences(tiny_cnn: Path, tmp_path: Path) -> None:
    """The boards' own benchmark entry times N inferences in N (the exporter's ran
    N x max(10, N): 2.56 million forwards here); counted by the emulated PMU, which
    snapshots at every ``model_forward`` entry."""
    from aidge_deploy.profiling.qemu_plugin import read_trace

    res = CliRunner().invoke(
        app,
        [
            "profile",
            str(tiny_cnn),
            "--target",
            "mps2-an386",
            "--iterations",
            "1600",
            "--warmup",
            "2",
            "--counters",
            "emu-instructions",
            "--work-dir",
            str(tmp_path / "w"),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout)
    assert len(result["timings_ms"]) == 1600
    (trace_path,) = Path(result["log_path"]).parent.glob("counters-*/pmu.trace")
    trace = read_trace(trace_path)
    forwards = [s for s in trace.snapshots if s.boundary == 0]  # model_forward entries
    assert len(forwards) == 2 + 1600


def test_a_qemu_of_ones_own_with_more_options_runs_the_board(
    export_factory, tmp_path: Path, no_qemu_left
) -> None:  # type: ignore[no-untyped-def]
    """``QemuOptions``: the board runs on the emulator named (here a wrapper that records
    its command line, then is the real QEMU) with the options given after the board's; the
    bundle's toolchain says which emulator ran; a binary that is not there is a Preflight
    error naming the option, before anything is built."""
    real = shutil.which("qemu-system-arm")
    assert real is not None
    calls = tmp_path / "calls.txt"
    wrapper = tmp_path / "my-qemu"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    artifact = export_factory("benchmark", target="mps2-an386", nb_iterations=2)
    own = QemuOptions(binary=str(wrapper), extra_args=("-name", "aidge-own-qemu"))
    result = aidge_deploy.deploy(
        artifact, DeployConfig(report_dir=tmp_path / "bundle", backend_options=(own,))
    )
    assert result.metric("emulated_instructions") is not None
    boots = [line for line in calls.read_text().splitlines() if line.startswith("-M ")]
    assert boots and all(line.endswith("-name aidge-own-qemu") for line in boots), boots
    metadata = json.loads((tmp_path / "bundle" / "run_metadata.json").read_text())
    assert str(wrapper) in metadata["toolchain"]["qemu-system-arm"]
    assert metadata["config"]["backend_options"] == {
        "QemuOptions": {"binary": str(wrapper), "extra_args": ["-name", "aidge-own-qemu"]}
    }

    missing = QemuOptions(binary=str(tmp_path / "no-such-qemu"))
    with pytest.raises(PreflightError) as info:
        aidge_deploy.deploy(
            artifact, DeployConfig(backend_options=(missing,)), work_dir=tmp_path / "run2"
        )
    assert "no-such-qemu" in info.value.message and "--qemu-binary" in (info.value.hint or "")
