"""The emulated PMU: build the aidge_pmu QEMU plugin on first use, and read its snapshots.

QEMU models no cycle counter and no PMU; the TCG plugin ``plugin/aidge_pmu.c`` counts
guest instructions, loads, stores and taken branches deterministically, estimates cycles with
the core's timing model when given one (``profiling.timing``; the decoder and the rules are
``plugin/thumb_decode.c`` and ``plugin/timing_model.c``), and snapshots the counts each time
execution reaches a *boundary* address (on the emulated boards, the BSP's cycle-counter reads
around each layer and each timed inference). Debian ships no plugin header, so the plugin
declares the QEMU 7.2 v1 API itself and is compiled here with the machine's C compiler into
the cache (``<cache>/tools/``), once per source version.

Plugin interface (see the C file's header for the exact semantics of each counter):
``qemu-system-arm ... -plugin <so>,boundary=0x<addr>[,boundary=...],out=<file>[,timing=<table>]
[,ws=<start>:<size>:<n>][,mem=off]`` (or ``boundaries=<file>``, read when the first block is
translated, in place of the ``boundary=`` list); the file holds ``S <seq> <boundary> <instructions>
<loads> <stores> <branches_taken> <estimated_cycles>`` per snapshot (counts of everything
executed *before* the boundary instruction) and a final ``T`` total.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType

from aidge_deploy.connections.toolcache import compile_cached, find_c_compiler
from aidge_deploy.errors import CaptureError, ConfigError

#: counter order in the plugin's records
PLUGIN_COUNTERS = ("instructions", "loads", "stores", "branches_taken", "estimated_cycles")
#: plugin counter -> catalogue counter (domain ``emulated``)
CATALOGUE_NAMES = MappingProxyType(
    {
        "instructions": "emu-instructions",
        "loads": "emu-loads",
        "stores": "emu-stores",
        "branches_taken": "emu-branches-taken",
    }
)
_SOURCES = (
    "aidge_pmu.c",
    "thumb_decode.c",
    "timing_model.c",
    "timing_inorder.c",
    "qemu_plugin_api.h",
    "thumb_decode.h",
    "timing_model.h",
)
_CFLAGS = ("-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-Wall")
_HEADER = "# aidge_pmu 2 "


@functools.cache
def _sources() -> tuple[Path, ...]:
    """The plugin's source files (where the package is does not change in a process)."""
    folder = Path(str(resources.files("aidge_deploy.profiling").joinpath("plugin")))
    return tuple(folder / name for name in _SOURCES)


def plugin_path(cache_root: Path | None = None, compiler: str | None = None) -> Path:
    """The built plugin (``.so``), compiling it first if this source version is not cached."""
    cc = find_c_compiler(compiler, purpose="the emulated-PMU QEMU plugin")
    return compile_cached(
        "libaidge_pmu",
        _sources(),
        cc,
        _CFLAGS,
        suffix=".so",
        cache_root=cache_root,
    )


@dataclass(frozen=True)
class WaitStates:
    """A memory region whose reads cost wait states (the board's memory timing)."""

    start: int
    size: int
    wait_states: int


def plugin_option(
    plugin: Path,
    boundaries: Sequence[int] | Path,
    out: Path,
    *,
    timing: Path | None = None,
    wait_states: Sequence[WaitStates] = (),
    count_memory: bool = True,
    blocks: Path | None = None,
) -> list[str]:
    """``["-plugin", "<so>,boundary=0x...,out=<file>[,timing=...]"]`` for the QEMU command
    line: ``timing`` is the core's cost table (``profiling.timing.plugin_table_path``),
    ``wait_states`` the board's slow regions, ``count_memory=False`` leaves the load and store
    counters out (no memory callback unless a region needs one: a faster run), ``blocks``
    is where the plugin writes every block's runs and static cycles at exit
    (``read_blocks``).

    ``boundaries`` may be a file the plugin reads when it translates the first block
    (``write_boundaries``): QEMU can then start before the firmware is known."""
    if not isinstance(boundaries, Path) and len(boundaries) > 16:
        raise ConfigError(
            f"{len(boundaries)} boundary addresses; the plugin takes at most 16",
            hint="Snapshot at fewer addresses.",
        )
    if len(wait_states) > 8:
        raise ConfigError(f"{len(wait_states)} wait-state regions; the plugin takes at most 8",
                          hint="Merge the board's regions.")  # fmt: skip
    boundaries_file = boundaries if isinstance(boundaries, Path) else None
    for path in (plugin, out, timing, boundaries_file, blocks):
        if path is not None and "," in str(path):
            raise ConfigError(
                f"QEMU cannot take a plugin path with a comma: {path}",
                hint="Use a work directory without commas in its path.",
            )
    if isinstance(boundaries, Path):
        parts = [str(plugin), f"boundaries={boundaries}", f"out={out}"]
    else:
        parts = [str(plugin), *(f"boundary={addr:#x}" for addr in boundaries), f"out={out}"]
    if timing is not None:
        parts.append(f"timing={timing}")
    parts += [f"ws={r.start:#x}:{r.size:#x}:{r.wait_states}" for r in wait_states]
    if not count_memory:
        parts.append("mem=off")
    if blocks is not None:
        parts.append(f"blocks={blocks}")
    return ["-plugin", ",".join(parts)]


def write_boundaries(path: Path, boundaries: Sequence[int]) -> None:
    """The boundary addresses for a plugin started with ``boundaries=path``: written before
    the core runs (the plugin reads them when it translates the first block)."""
    if len(boundaries) > 16:
        raise ConfigError(
            f"{len(boundaries)} boundary addresses; the plugin takes at most 16",
            hint="Snapshot at fewer addresses.",
        )
    path.write_text("".join(f"{addr:#x}\n" for addr in boundaries), encoding="ascii")


@dataclass(frozen=True)
class Snapshot:
    """The counters when execution reached a boundary (everything before it)."""

    seq: int
    boundary: int  # index into PluginTrace.boundaries
    counts: Mapping[str, int]

    def minus(self, earlier: Snapshot) -> dict[str, int]:
        return {k: v - earlier.counts[k] for k, v in self.counts.items()}


@dataclass(frozen=True)
class PluginTrace:
    """Everything one QEMU run of the plugin wrote."""

    boundaries: tuple[int, ...]
    snapshots: tuple[Snapshot, ...]
    #: counts at QEMU exit; None when QEMU was killed before its exit handlers ran
    total: Mapping[str, int] | None
    #: the core whose timing model estimated the cycles; None: no model (the column is 0)
    timing_model: str | None = None

    def intervals(self) -> tuple[dict[str, int], ...]:
        """Counts between consecutive snapshots (what ran from one boundary to the next)."""
        return tuple(b.minus(a) for a, b in itertools.pairwise(self.snapshots))


def _counts(
    fields: Sequence[str], line_number: int, path: Path, modelled: bool
) -> Mapping[str, int]:
    """The record's counts by name; ``estimated_cycles`` only when a timing model ran (its
    column is 0 otherwise: a figure that does not exist, never a zero)."""
    if len(fields) != len(PLUGIN_COUNTERS):
        raise CaptureError(
            f"{path}:{line_number}: expected {len(PLUGIN_COUNTERS)} counts, got {len(fields)}",
            hint="The plugin file is truncated or from another plugin version.",
        )
    counts = dict(zip(PLUGIN_COUNTERS, map(int, fields), strict=True))
    if not modelled:
        del counts["estimated_cycles"]
    return MappingProxyType(counts)


def read_trace(path: Path) -> PluginTrace:
    """Parse the plugin's ``out=`` file."""
    try:
        text = path.read_text(encoding="ascii")
    except OSError as exc:
        raise CaptureError(
            f"The emulated-PMU plugin wrote no file at {path}: {exc.strerror}",
            hint="QEMU did not load the plugin (see its stderr) or failed before starting.",
        ) from exc
    # every record ends with a newline: an unterminated last one is still being written
    # (QEMU is exiting as the run is read) or was cut short by a kill, and is not a record
    lines = text.splitlines()
    if text and not text.endswith("\n"):
        lines.pop()
    if not lines or not lines[0].startswith(_HEADER):
        raise CaptureError(
            f"{path} is not an aidge_pmu trace", hint="Rebuild the plugin (clear the cache)."
        )
    boundaries: list[int] = []
    snapshots: list[Snapshot] = []
    total: Mapping[str, int] | None = None
    model: str | None = None
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split()
        if not fields:
            continue
        try:
            if fields[0] == "M":
                model = None if fields[1] == "none" else fields[1]
            elif fields[0] == "B":
                boundaries.append(int(fields[2], 16))
            elif fields[0] == "S":
                snapshots.append(
                    Snapshot(
                        int(fields[1]),
                        int(fields[2]),
                        _counts(fields[3:], number, path, model is not None),
                    )
                )
            elif fields[0] == "T":
                total = _counts(fields[1:], number, path, model is not None)
            else:
                raise ValueError(fields[0])
        except (ValueError, IndexError) as exc:
            raise CaptureError(
                f"{path}:{number}: malformed record {line!r}",
                hint="The plugin file is corrupt or from another plugin version.",
            ) from exc
    return PluginTrace(tuple(boundaries), tuple(snapshots), total, model)


@dataclass(frozen=True)
class BlockRun:
    """One translated block of a run (``blocks=FILE``): ``[start, end)``, its instruction
    count, how many times it started, and its static cycles (the timing model's, from an
    empty pipeline; 0 without a model)."""

    start: int
    end: int
    instructions: int
    runs: int
    static_cycles: int


def read_blocks(path: Path) -> tuple[BlockRun, ...]:
    """The plugin's ``blocks=`` file, hottest first (runs x static cycles, then runs)."""
    try:
        lines = path.read_text(encoding="ascii").splitlines()
    except OSError as exc:
        raise CaptureError(
            f"The emulated-PMU plugin wrote no block profile at {path}: {exc.strerror}",
            hint="QEMU was killed before its exit handlers ran, or did not load the plugin.",
        ) from exc
    blocks = []
    for number, line in enumerate(lines, start=1):
        fields = line.split()
        if not fields or fields[0] == "#":
            continue
        try:
            if fields[0] != "H" or len(fields) != 6:
                raise ValueError(fields[0])
            start, end, count, runs, cycles = (int(f, 0) for f in fields[1:])
        except ValueError as exc:
            raise CaptureError(
                f"{path}:{number}: malformed block record {line!r}",
                hint="The file is corrupt or from another plugin version.",
            ) from exc
        blocks.append(BlockRun(start, end, count, runs, cycles))
    return tuple(sorted(blocks, key=lambda b: (-b.runs * b.static_cycles, -b.runs, b.start)))


__all__ = [
    "CATALOGUE_NAMES",
    "PLUGIN_COUNTERS",
    "BlockRun",
    "PluginTrace",
    "Snapshot",
    "WaitStates",
    "plugin_option",
    "plugin_path",
    "read_blocks",
    "read_trace",
    "write_boundaries",
]
