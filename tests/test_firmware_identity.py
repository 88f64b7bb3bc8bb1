"""Firmware identity (``aidge_deploy.firmwareid``): every program we build prints its
export's hash at boot, and a run whose program printed another export's hash is refused
with both hashes. Real builds: a host CMake export and emulated mps2-an386 boards, one of
them given a swapped ELF (a stale image); a firmware that prints no hash keeps working."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import modelzoo
from aidge_deploy.api import deploy
from aidge_deploy.artifact import export_hash, load_export_artifact
from aidge_deploy.config import DeployConfig
from aidge_deploy.firmwareid import UNVERIFIED, FirmwareMismatch, check_identity
from envparts import needs

H1, H2 = "a" * 64, "b" * 64

needs_qemu = needs(
    shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None,
    "qemu-system-arm and the Arm cross toolchain are needed",
)


def test_the_identity_line_is_read_checked_and_taken_out() -> None:
    output = f"AIDGE_EXPORT_HASH {H1}\r\n\r\n**** DEMO ****\r\ninference_time: 1.0\r\n"
    identity = check_identity(output, H1)
    assert identity.verified and identity.printed == H1
    assert identity.output == "\r\n**** DEMO ****\r\ninference_time: 1.0\r\n"
    with pytest.raises(FirmwareMismatch) as refused:
        check_identity(output, H2, where="mps2-an386")
    assert H1 in refused.value.message and H2 in refused.value.message
    assert "stale image" in str(refused.value.hint)
    silent = check_identity("inference_time: 1.0\n", H1)  # a third-party firmware
    assert not silent.verified and silent.output == "inference_time: 1.0\n"
    # two programs' lines in one capture (a board reset into another image mid-run)
    with pytest.raises(FirmwareMismatch):
        check_identity(f"AIDGE_EXPORT_HASH {H1}\nx\nAIDGE_EXPORT_HASH {H2}\n", H1)


@pytest.mark.slow
def test_a_host_program_prints_its_export_hash(export_factory: Any, tmp_path: Path) -> None:
    """The host export's sources are Aidge's (aidge_export_cpp): the hash comes from a source
    the build adds (CMAKE_PROJECT_INCLUDE), and the export's files stay untouched."""
    artifact = export_factory("benchmark")
    before = export_hash(artifact)
    result = deploy(artifact, DeployConfig(target="host", build_dir=tmp_path / "build"))
    log = Path(str(result.log_path)).read_text()
    assert re.search(rf"^AIDGE_EXPORT_HASH {before}$", log, re.MULTILINE), log[:300]
    assert UNVERIFIED not in (result.metrics.get("notices") or [])
    assert export_hash(load_export_artifact(artifact.path)) == before  # type: ignore[attr-defined]


@pytest.mark.slow
@pytest.mark.qemu
@needs_qemu
def test_a_swapped_elf_on_an_emulated_board_is_refused_with_both_hashes(
    export_factory: Any, tmp_path: Path
) -> None:
    """Two exports built for mps2-an386; the first's build folder then holds the second's
    ELF (a stale image, newer than its objects: make keeps it). The run is refused, naming
    both hashes, and its log is kept."""
    mine = export_factory("benchmark", target="mps2-an386", nb_iterations=2)
    other = export_factory(
        "benchmark",
        target="mps2-an386",
        model=modelzoo.gap_cnn(tmp_path / "gap.onnx"),
        nb_iterations=2,
    )
    build_mine, build_other = tmp_path / "mine", tmp_path / "other"
    ok = deploy(mine, DeployConfig(target="mps2-an386", build_dir=build_mine))
    assert UNVERIFIED not in (ok.metrics.get("notices") or [])
    deploy(other, DeployConfig(target="mps2-an386", build_dir=build_other))
    elf = mine.manifest.expected_artifact  # type: ignore[attr-defined]
    shutil.copy2(build_other / elf, build_mine / elf)
    (build_mine / elf).touch()
    with pytest.raises(FirmwareMismatch) as refused:
        deploy(mine, DeployConfig(target="mps2-an386", build_dir=build_mine))
    message = refused.value.message
    assert export_hash(other) in message and export_hash(mine) in message
    assert refused.value.log_path is not None and Path(refused.value.log_path).exists()


@pytest.mark.slow
@pytest.mark.qemu
@needs_qemu
def test_a_firmware_that_prints_no_hash_runs_unverified(
    export_factory: Any, tmp_path: Path
) -> None:
    """An export whose ``main()`` prints no hash (a third-party one): measured as before, with
    the notice that its identity is unverified."""
    source = export_factory("benchmark", target="mps2-an386", nb_iterations=2)
    copy = tmp_path / "third-party"
    shutil.copytree(source.path, copy)  # type: ignore[attr-defined]
    main = copy / "main.cpp"
    text = main.read_text()
    silent = re.sub(r"#if defined\(AIDGE_EXPORT_HASH\)\n.*?#endif\n", "", text, flags=re.S)
    assert silent != text
    main.write_text(silent)
    result = deploy(copy, DeployConfig(target="mps2-an386", build_dir=tmp_path / "build"))
    assert UNVERIFIED in result.metrics["notices"]
    assert result.timings is not None and result.metrics["cycles"]  # measured as before
