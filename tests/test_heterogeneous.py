"""Heterogeneous execution: a program per core, on the dual-core emulated board and on ake7.

The emulated tests are real end to end: the tiny CNN exported by the published Aidge
exporter for ``mps2-an521`` with ``heterogeneous_deploy=True`` (its two programs built by
``make build``), both loaded into one QEMU 7.2, core 1 started by core 0 through the
SSE-200's INITSVTOR1 and CPUWAIT, both UARTs captured and parsed. The failure test edits
the exported ``main.cpp`` so core 0 never releases core 1 (``AIDGE_START_CORE1 0``): the
firmware itself then reports the failure, which must reach the caller as a ``CoreError``
naming core 1, its log on disk.

The ake7 test has no board here: the probe is a recording flasher standing in for the
registered one (``ProbeBoardTarget.flasher``), a loopback TCP port plays the HP core's
UART, and the test checks the same mechanics: every image of the export flashed
(the HP one last, with the reset), the output parsed, a FAIL line a typed error.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import aidge_deploy
from aidge_deploy import DeployConfig
from aidge_deploy.artifact import EXPORT_MANIFEST_NAME
from aidge_deploy.errors import CoreError
from testfw import needs_qemu

pytestmark = [pytest.mark.slow, pytest.mark.qemu]


@pytest.fixture(scope="module")
def dual_export(export_factory: Any) -> Path:
    artifact = export_factory("output", target="mps2-an521", heterogeneous_deploy=True)
    return Path(artifact.path)  # type: ignore[attr-defined]


@needs_qemu
def test_a_two_program_export_runs_both_cores_end_to_end(
    dual_export: Path, export_factory: Any, tmp_path: Path
) -> None:
    manifest = json.loads((dual_export / EXPORT_MANIFEST_NAME).read_text())
    assert manifest["application_config"]["heterogeneous_deploy"] is True
    assert manifest["expected_artifact"] == "bin/aidge_mps2_an521_core[0-9].elf"
    result = aidge_deploy.deploy(
        dual_export, DeployConfig(target="mps2-an521"), work_dir=tmp_path / "run"
    )
    cores = result.metrics["cores"]
    assert [c["core"] for c in cores] == [0, 1]
    # both programs ran the model on the same input: the same outputs, parsed from each UART
    assert cores[0]["outputs"] == cores[1]["outputs"]
    np.testing.assert_allclose(result.output[0], np.asarray(cores[1]["outputs"][0]), atol=1e-6)
    host = aidge_deploy.deploy(
        Path(export_factory("output").path), DeployConfig(), work_dir=tmp_path / "host"
    )
    np.testing.assert_allclose(result.output[0], host.output[0], atol=1e-4)
    core1_log = Path(cores[1]["uart_log"])
    assert core1_log.is_file() and "DUAL_CORE_TEST: CORE1 DONE" in core1_log.read_text()
    assert any(n.startswith("DUAL_CORE_TEST: PASS") for n in result.metrics["notices"])
    # per-core figures: each core's entry point in emulated instructions, with its source;
    # the plugin's per-core count is said unavailable, with the reason
    for core in cores:
        assert isinstance(core["entry_instructions"], int) and core["entry_instructions"] > 1000
        assert "emulated (QEMU icount)" in core["entry_instructions_source"]
        assert core["plugin_instructions"].startswith("unavailable (")
    # core 1 runs while core 0 sleeps: its count is core 0's plus the wake-ups, within 1 %
    assert cores[1]["entry_instructions"] - cores[0]["entry_instructions"] >= 0
    assert cores[1]["entry_instructions"] < 1.01 * cores[0]["entry_instructions"]


@needs_qemu
def test_a_second_core_that_never_starts_is_a_core_error_with_its_log(
    dual_export: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "export"
    shutil.copytree(dual_export, broken)
    main = broken / "main.cpp"
    text = main.read_text()
    assert "#if !defined(AIDGE_START_CORE1)" in text
    main.write_text("#define AIDGE_START_CORE1 0\n#define AIDGE_CORE_WAIT_MS 2000U\n" + text)
    with pytest.raises(CoreError) as info:
        aidge_deploy.deploy(broken, DeployConfig(target="mps2-an521"), work_dir=tmp_path / "run")
    err = info.value
    assert err.core == "core 1"
    assert "core 1" in err.message and "never started" in err.message and err.hint
    assert err.log_path is not None and err.log_path.is_file()
    assert err.log_path.read_text() == ""  # core 1 never printed
    core0_log = err.log_path.parent / "uart.log"
    assert "DUAL_CORE_TEST: FAIL core1 never started" in core0_log.read_text()


# -- ake7: the same mechanics through its probe ------------------------------------------


class _RecordingFlasher:
    """Stands in for the board's probe flasher: records each image and reset it is given."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    def flash(self, request: Any) -> Any:
        from aidge_deploy.flash.program import FlashReport

        self.requests.append(request)
        return FlashReport(
            image=request.image,
            segments=(),
            bytes_written=request.image.stat().st_size,
            verified=request.verify,
            reset=request.reset,
            initial_sp=None,
            entry=None,
            duration_s=0.0,
        )


def _ake7_export(root: Path) -> Path:
    """The manifest of an ake7 heterogeneous export (the published fields): one ELF per
    core under ``out/``."""
    root.mkdir()
    manifest = {
        "schema_version": 1,
        "target": "ake7",
        "execution_domain": "realtime",
        "environment": "baremetal",
        "build_system": "make",
        "application": "output",
        "expected_artifact": "out/**/*.elf",
        "protocol": "aidge-uart-output/v1",
        "arch": "cortex-m55",
        "export_libraries": ["export_arm_cortexm"],
        "inputs": [],
        "outputs": [{"name": "out", "dtype": "float", "size": 2, "dims": [1, 2]}],
        "memory_peak_bytes": None,
        "profiling": False,
        "aidge_cmp": False,
        "application_config": {"kind": "output", "heterogeneous_deploy": True},
    }
    (root / EXPORT_MANIFEST_NAME).write_text(json.dumps(manifest))
    return root


def _uart_server(lines: str) -> tuple[str, Any]:
    """A loopback TCP port playing the HP core's UART: it sends ``lines`` once connected."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(60)

    def serve() -> None:
        try:
            client, _ = server.accept()
        except OSError:
            return
        with client:
            client.sendall(lines.encode())
            client.recv(1)  # hold the line open until the host closes it
        server.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return f"socket://127.0.0.1:{server.getsockname()[1]}", thread


@pytest.mark.parametrize("verdict", ["PASS", "FAIL"])
def test_ake7_flashes_every_image_through_its_probe_and_types_a_second_core_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verdict: str
) -> None:
    from aidge_deploy.artifact import load_export_artifact
    from aidge_deploy.buildsys import BuildStatus
    from aidge_deploy.flash.program import ResetMode
    from aidge_deploy.registry import get_deploy_target
    from aidge_deploy.results import BuildResult, DeployContext

    export = _ake7_export(tmp_path / "export")
    for core in ("hp", "he"):
        (export / "out" / core).mkdir(parents=True)
    (export / "out" / "hp" / "app_hp.elf").write_bytes(b"HP")
    (export / "out" / "he" / "app_he.elf").write_bytes(b"HE")
    output = (
        "****************** DEMO EXPORT ARM ******************\r\n"
        "out:\n\r0.500000 -0.250000 \n\r"
        f"DUAL_CORE_TEST: {verdict}\r\n"
        "********************** END DEMO *********************\r\n"
    )
    url, server = _uart_server(output)
    target = get_deploy_target("ake7", "local", DeployConfig(target="ake7", serial_port=url))
    assert target.runs_heterogeneous
    recorder = _RecordingFlasher()
    monkeypatch.setattr(type(target), "flasher", lambda self, log_dir: recorder)
    artifact = load_export_artifact(export)
    logs = tmp_path / "logs"
    logs.mkdir()
    ctx = DeployContext(artifact, export, "ake7", "local", export, logs)
    hp = export / "out" / "hp" / "app_hp.elf"
    build = BuildResult(hp, (), BuildStatus.BUILT, "", build_dir=export)
    try:
        target.flash(ctx, build)
        # both images through the probe, the HE core's first; the HP one's reset starts both
        assert [r.image.name for r in recorder.requests] == ["app_he.elf", "app_hp.elf"]
        assert [r.reset for r in recorder.requests] == [ResetMode.NONE, ResetMode.MONITOR]
        assert all(r.verify for r in recorder.requests)
        assert len(target.flash_reports) == 2
        execution = target.execute(ctx, build)
    finally:
        target.cleanup(ctx)
    server.join(10)
    if verdict == "PASS":
        parsed = target.parse_output(ctx, execution)
        assert parsed.outputs is not None
        np.testing.assert_allclose(parsed.outputs[0], [0.5, -0.25])
        assert "DUAL_CORE_TEST: PASS" in parsed.notices
    else:
        with pytest.raises(CoreError) as info:
            target.parse_output(ctx, execution)
        assert info.value.core == "the secondary core (M55-HE)"
        assert info.value.log_path is not None and info.value.log_path.is_file()
        assert "DUAL_CORE_TEST: FAIL" in info.value.log_path.read_text()
