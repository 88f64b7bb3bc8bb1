"""The aidge_pmu QEMU plugin on a real bare-metal firmware under qemu-system-arm.

``tests/data/pmu_firmware/pmu_fw.c`` runs two hand-written loops of known length between
calls to ``pmu_mark`` (the boundary), so the plugin's counts between snapshots are known
exactly; two runs must give identical files.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from elftools.elf.elffile import ELFFile

from aidge_deploy.errors import CaptureError, ConfigError
from aidge_deploy.profiling.counters import load_catalogue
from aidge_deploy.profiling.qemu_plugin import (
    CATALOGUE_NAMES,
    PLUGIN_COUNTERS,
    plugin_option,
    plugin_path,
    read_trace,
    write_boundaries,
)
from aidge_deploy.profiling.timing import load_model, plugin_table_path
from envparts import missing

pytestmark = pytest.mark.qemu

FIRMWARE = Path(__file__).parent / "data" / "pmu_firmware"
QEMU = shutil.which("qemu-system-arm")
GCC = shutil.which("arm-none-eabi-gcc")


def _expected(n: int, io: bool = False) -> dict[str, int]:
    """Counts between two marks around kernel(n) or kernel_io(n) (``io``, which loads one
    more literal first): see the comment at the top of pmu_fw.c."""
    return {
        "instructions": 4 * n + 6 + io,
        "loads": n + 1 + io,
        "stores": n,
        "branches_taken": n + 3,
    }


@pytest.fixture(scope="module")
def firmware(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if QEMU is None or GCC is None:
        missing("qemu-system-arm or arm-none-eabi-gcc is not installed")
    elf = tmp_path_factory.mktemp("pmu_fw") / "pmu_fw.elf"
    subprocess.run(
        [
            GCC,
            "-mcpu=cortex-m4",
            "-mthumb",
            "-O2",
            "-ffreestanding",
            "-nostdlib",
            "-nostartfiles",
            "-Wall",
            "-Werror",
            str(FIRMWARE / "pmu_fw.c"),
            f"-Wl,-T,{FIRMWARE / 'link.ld'}",
            "-o",
            str(elf),
        ],
        check=True,
        timeout=120,
    )
    return elf


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return plugin_path(tmp_path_factory.mktemp("cache"))


def _symbol(elf: Path, name: str) -> int:
    with elf.open("rb") as fh:
        symtab = ELFFile(fh).get_section_by_name(".symtab")
        (sym,) = symtab.get_symbol_by_name(name)  # type: ignore[union-attr]
        return int(sym["st_value"])


def _run(
    firmware: Path,
    plugin: Path,
    out: Path,
    boundaries: list[int] | Path,
    *extra: str,
    **options: Any,
) -> subprocess.CompletedProcess[str]:
    assert QEMU is not None
    return subprocess.run(
        [
            QEMU,
            "-M",
            "mps2-an386",
            "-nographic",
            "-monitor",
            "none",
            "-serial",
            "null",
            "-semihosting-config",
            "enable=on,target=native",
            "-kernel",
            str(firmware),
            *extra,
            *plugin_option(plugin, boundaries, out, **options),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_plugin_counts_a_known_loop_exactly_and_deterministically(
    firmware: Path, plugin: Path, tmp_path: Path
) -> None:
    mark = _symbol(firmware, "pmu_mark")
    assert mark & 1, "a Thumb function symbol has bit 0 set; the plugin must ignore it"
    traces = []
    for i in range(2):
        out = tmp_path / f"run{i}.txt"
        proc = _run(firmware, plugin, out, [mark])
        assert proc.returncode == 0, proc.stderr
        traces.append((out.read_text(), read_trace(out)))
    (text0, trace), (text1, _) = traces
    assert text0 == text1, "two runs of the same firmware must give identical counts"
    assert trace.boundaries == (mark & ~1,)
    assert [s.seq for s in trace.snapshots] == [0, 1, 2, 3] and {
        s.boundary for s in trace.snapshots
    } == {0}
    assert trace.intervals() == (_expected(1000), _expected(3000), _expected(1000, io=True))
    assert trace.total is not None
    last = trace.snapshots[-1].counts
    assert all(trace.total[k] > last[k] for k in ("instructions",))


def test_device_reads_replayed_under_icount_change_no_count(
    firmware: Path, plugin: Path, tmp_path: Path
) -> None:
    """Under -icount (as deploys run) QEMU stops a block at each device access and replays
    that instruction alone; the plugin counts whole blocks, so it must add exactly the part
    of a stopped block that ran: every count and estimated cycle equals the run without
    -icount (no replay), kernel_io's 1000 replays included."""
    mark = _symbol(firmware, "pmu_mark")
    timing = plugin_table_path(load_model("cortex-m4"), tmp_path)
    runs = []
    for name, extra in (("plain", ()), ("icount", ("-icount", "shift=6,align=off,sleep=off"))):
        for memory in (False, True):
            out = tmp_path / f"{name}-{memory}.txt"
            proc = _run(firmware, plugin, out, [mark], *extra, timing=timing, count_memory=memory)
            assert proc.returncode == 0, proc.stderr
            runs.append((name, memory, read_trace(out)))
    by_memory: dict[bool, list[tuple[str, Any]]] = {False: [], True: []}
    for name, memory, trace in runs:
        by_memory[memory].append((name, trace.snapshots))
    for memory, [(_, plain), (_, icount)] in by_memory.items():
        assert icount == plain, f"memory counters {'on' if memory else 'off'}"
    kernel_io = runs[-1][2].intervals()[2]  # under -icount, memory counted
    assert {k: kernel_io[k] for k in _expected(1000)} == _expected(1000, io=True)
    assert kernel_io["estimated_cycles"] > kernel_io["instructions"]


def test_boundaries_file_read_at_first_translation_counts_the_same(
    firmware: Path, plugin: Path, tmp_path: Path
) -> None:
    """``boundaries=FILE`` (a deploy starts QEMU before it knows the firmware, and writes
    the file before the core runs) gives the very trace the ``boundary=`` list gives; a
    missing or bad file stops QEMU with status 3 and says why, never a run without them."""
    mark = _symbol(firmware, "pmu_mark")
    listed = tmp_path / "listed.txt"
    assert _run(firmware, plugin, listed, [mark]).returncode == 0
    addresses = tmp_path / "boundaries"
    write_boundaries(addresses, [mark])
    assert addresses.read_text() == f"{mark:#x}\n"
    from_file = tmp_path / "file.txt"
    proc = _run(firmware, plugin, from_file, addresses)
    assert proc.returncode == 0, proc.stderr
    assert from_file.read_text() == listed.read_text()
    assert read_trace(from_file).intervals() == read_trace(listed).intervals() != ()

    missing_file = _run(firmware, plugin, tmp_path / "m.txt", tmp_path / "absent")
    assert missing_file.returncode == 3
    assert "cannot read the boundaries file" in missing_file.stderr
    addresses.write_text("0x10\nnot-an-address\n")
    bad = _run(firmware, plugin, tmp_path / "b.txt", addresses)
    assert bad.returncode == 3 and "bad or too many boundaries" in bad.stderr
    with pytest.raises(ConfigError, match="at most 16"):
        write_boundaries(addresses, list(range(17)))


def test_plugin_without_boundary_still_totals(firmware: Path, plugin: Path, tmp_path: Path) -> None:
    out = tmp_path / "total.txt"
    assert _run(firmware, plugin, out, []).returncode == 0
    trace = read_trace(out)
    assert trace.snapshots == () and trace.total is not None
    assert trace.total["instructions"] > 4 * 4000 and trace.total["stores"] >= 4000


def test_plugin_is_cached_and_rebuilt_only_for_new_sources(tmp_path: Path) -> None:
    first = plugin_path(tmp_path)
    mtime = first.stat().st_mtime_ns
    assert plugin_path(tmp_path) == first and first.stat().st_mtime_ns == mtime
    assert first.parent == tmp_path / "tools"


def test_plugin_names_match_the_catalogue() -> None:
    """Every counted event is a catalogue counter; estimated cycles are the timing model's
    figure (``profiling.timing``), not a counter of the emulated PMU's catalogue."""
    emulated = {c.name for c in load_catalogue().in_domain("emulated")}
    counted = [k for k in PLUGIN_COUNTERS if k != "estimated_cycles"]
    assert {CATALOGUE_NAMES[k] for k in counted} == emulated
    assert "estimated_cycles" not in CATALOGUE_NAMES


def test_plugin_option_and_trace_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="comma"):
        plugin_option(tmp_path / "a,b.so", [0x40], tmp_path / "out")
    with pytest.raises(ConfigError):
        plugin_option(tmp_path / "p.so", list(range(17)), tmp_path / "out")
    assert plugin_option(tmp_path / "p.so", [0x41], tmp_path / "o")[1].endswith(
        f"boundary=0x41,out={tmp_path / 'o'}"
    )
    assert plugin_option(tmp_path / "p.so", tmp_path / "b", tmp_path / "o")[1].endswith(
        f"boundaries={tmp_path / 'b'},out={tmp_path / 'o'}"
    )
    with pytest.raises(ConfigError, match="comma"):
        plugin_option(tmp_path / "p.so", tmp_path / "b,c", tmp_path / "o")
    with pytest.raises(CaptureError, match="no file"):
        read_trace(tmp_path / "missing.txt")
    bad = tmp_path / "bad.txt"
    bad.write_text(
        "# aidge_pmu 2 instructions loads stores branches_taken estimated_cycles\nM none\n"
        "S 0 0 1 2\n"
    )
    with pytest.raises(CaptureError, match="expected 5 counts"):
        read_trace(bad)
    bad.write_text("hello\n")
    with pytest.raises(CaptureError, match="not an aidge_pmu trace"):
        read_trace(bad)
    # read while QEMU is still exiting: the total being written is not a record yet
    partial = tmp_path / "partial.txt"
    partial.write_text(
        "# aidge_pmu 2 instructions loads stores branches_taken estimated_cycles\nM none\n"
        "B 0 0x40\nS 0 0 10 2 1 1 0\nT 12 3"
    )
    trace = read_trace(partial)
    assert trace.total is None and len(trace.snapshots) == 1


def test_timing_plan_binds_only_a_firmware_with_the_benchmark_entry(
    firmware: Path, tmp_path: Path
) -> None:
    """The plan made before the build names a boundaries file; a firmware without the
    boards' timed entry (here a bare test program) gets the model's reason instead, and no
    file is written for it."""
    from aidge_deploy.boards.baremetal.qemu.estimate import TimingPlan, plan_timing_run
    from aidge_deploy.config import TimingMode
    from aidge_deploy.profiling.timing import EstimatedCycles
    from aidge_qemu_descriptors import get_board

    board = get_board("mps2-an386")
    plan, why_not = plan_timing_run(board, TimingMode.MODEL, "benchmark", {}, tmp_path)
    assert isinstance(plan, TimingPlan) and why_not is None
    assert f"boundaries={tmp_path / 'timing.boundaries'}" in plan.plugin_args[1]
    bound = plan.bind(firmware)
    assert isinstance(bound, EstimatedCycles) and bound.unavailable
    assert not (tmp_path / "timing.boundaries").exists()
    assert plan_timing_run(board, TimingMode.CPI1, "benchmark", {}, tmp_path) == (None, None)
    assert plan_timing_run(board, TimingMode.MODEL, "inference", {}, tmp_path) == (None, None)
