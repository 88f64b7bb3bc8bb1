"""The bare-metal test firmware (tests/data/firmware) as a pytest plugin: its build helpers,
process checks, the ``firmware`` builder fixture and the ``run_dir`` fixture that asserts no
QEMU outlives a test. Shared by the RSP, serial-capture and QEMU-lifecycle tests."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from envparts import needs

FIRMWARE_DIR = Path(__file__).parent / "data" / "firmware"


def _support(name: str) -> ModuleType:
    key = f"aidge_testfw_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, FIRMWARE_DIR / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


fw = _support("build")
procs = _support("procs")
Variant = fw.Variant
needs_qemu = needs(
    shutil.which("qemu-system-arm") is not None and fw.toolchain_available(),
    "qemu-system-arm or arm-none-eabi-gcc is not installed",
)


@pytest.fixture(scope="session")
def firmware(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, object], Path]:
    """``firmware(board, variant)`` -> the built ELF (built once per session)."""
    out = tmp_path_factory.mktemp("firmware")
    cache: dict[tuple[str, object], Path] = {}

    def build(board: str, variant: object) -> Path:
        if (board, variant) not in cache:
            cache[(board, variant)] = fw.build_firmware(board, variant, out)
        return cache[(board, variant)]

    return build


@pytest.fixture
def run_dir(tmp_path: Path) -> Iterator[Path]:
    """A per-test directory; after the test no QEMU mentioning it may be alive."""
    yield tmp_path
    assert procs.qemu_pids_mentioning(str(tmp_path)) == []
