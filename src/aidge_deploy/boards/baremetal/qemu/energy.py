"""``--power emulated``: energy of a QEMU board's power window from the emulated PMU counts.

The monitor kind lives with the emulated boards it reads (its entry point names it here).

The power variant of the emulated boards' BSP calls ``aidge_power_gate_open`` and
``aidge_power_gate_close`` around its N inferences. The emulated-PMU plugin snapshots its
counters (instructions, loads, stores, taken branches) at those two functions, at each
``model_forward`` entry and at each per-layer cycle read, so the window's counts, the
inferences inside it and each layer's counts are exact and deterministic. The board's
energy model (``energy_model.py``) turns counts into energy: an **estimate**, with the
model's uncertainty, never a measurement. Time and energy share one time base: the
model's cycles (the plugin's estimated cycles when it counts them, else instructions at
CPI = 1) ÷ the core clock; QEMU's virtual clock is never read.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aidge_deploy import stats
from aidge_deploy.boards.baremetal.qemu.estimate import model_plugin_options
from aidge_deploy.boards.baremetal.qemu.pmu import CYCLES_SYMBOL as CYCLES
from aidge_deploy.boards.baremetal.qemu.pmu import FORWARD_SYMBOL, per_forward_layer_rows
from aidge_deploy.config import TimingMode
from aidge_deploy.elf import ElfReadError, read_elf
from aidge_deploy.errors import CaptureError, ConfigError, InternalError
from aidge_deploy.metrics import Provenance
from aidge_deploy.power.analysis import TRACE_POINTS
from aidge_deploy.power.energy_model import EnergyModel, boards_with_models, energy_model_for
from aidge_deploy.power.failures import PowerCaptureError
from aidge_deploy.power.protocol import (
    GateKind,
    MonitorCapabilities,
    MonitorIdentity,
    PowerCapture,
    PowerMonitor,
    PowerTrace,
    WindowRequest,
)
from aidge_deploy.power.registry import MonitorKind, ThisMachine
from aidge_deploy.power.source import PowerSource
from aidge_deploy.profiling.qemu_plugin import (
    PLUGIN_COUNTERS,
    PluginTrace,
    Snapshot,
    plugin_option,
    plugin_path,
    read_trace,
)
from aidge_deploy.profiling.validity import IssueCode
from aidge_deploy.readiness import ToolCheck
from aidge_qemu_descriptors import get_board

if TYPE_CHECKING:
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.targetspec import TargetCaps

GATE_OPEN = "aidge_power_gate_open"
GATE_CLOSE = "aidge_power_gate_close"
#: boundary order given to the plugin
_OPEN, _CLOSE, _FORWARD, _CYCLES = range(4)


def gate_symbols(elf: Path) -> dict[str, int]:
    """Addresses (Thumb bit cleared) of the gate functions, the forward and the cycle read."""
    try:
        image = read_elf(elf, symbols=True)
    except ElfReadError as exc:
        raise CaptureError(
            f"cannot read the symbols of {elf.name}: {exc.reason}",
            hint="The power monitor needs the power firmware ELF the build produced.",
        ) from exc
    found: dict[str, int] = {}
    for sym in image.functions():
        name = "model_forward" if FORWARD_SYMBOL.match(sym.name) else sym.name
        if name in (GATE_OPEN, GATE_CLOSE, CYCLES, "model_forward"):
            found.setdefault(name, sym.address)
    return found


class EmulatedEnergyMonitor(PowerMonitor):
    """The energy model of one emulated board, gated by the plugin's boundaries."""

    def __init__(
        self, source: PowerSource, board: str, cpu_hz: int, timing: TimingMode = TimingMode.MODEL
    ) -> None:
        super().__init__(source)
        self.model: EnergyModel = energy_model_for(board)
        self.cpu_hz = cpu_hz
        #: the deploy run's time base (its core's timing model, or CPI = 1): the window's
        #: cycles are priced on the same one
        self.timing = TimingMode(timing)
        self.board_name = board
        self._trace_path: Path | None = None
        self._args: tuple[str, ...] = ()
        self._layers: tuple[str, ...] = ()
        self._inferences = 0

    @property
    def capabilities(self) -> MonitorCapabilities:
        return MonitorCapabilities(
            channels=("energy",),
            sample_rate_hz=None,
            gate=GateKind.BOUNDARY,
            gate_input=f"{GATE_OPEN} / {GATE_CLOSE}",
            sees_idle=False,
            provenance=Provenance.ESTIMATED,
            scope=self.model.scope,
        )

    @property
    def identity(self) -> MonitorIdentity:
        return MonitorIdentity(
            name=f"energy model {self.model.board}",
            model=self.model.core,
            details={"sources": " | ".join(self.model.sources)},
        )

    def arm(self, request: WindowRequest) -> None:
        if request.firmware is None:
            raise InternalError("The emulated monitor needs the power firmware")
        syms = gate_symbols(request.firmware)
        missing = [s for s in (GATE_OPEN, GATE_CLOSE, "model_forward") if s not in syms]
        if missing:
            raise CaptureError(
                f"{request.firmware.name} lacks {', '.join(missing)}",
                hint="The firmware is not the power variant of an emulated board's BSP.",
            )
        boundaries = [syms[GATE_OPEN], syms[GATE_CLOSE], syms["model_forward"]]
        if CYCLES in syms:
            boundaries.append(syms[CYCLES])
        request.work_dir.mkdir(parents=True, exist_ok=True)
        self._trace_path = request.work_dir / "power.trace"
        timing = model_plugin_options(get_board(self.board_name), self.timing)
        self._args = tuple(plugin_option(plugin_path(), boundaries, self._trace_path, **timing))
        self._layers = request.layer_names
        self._inferences = request.inferences

    def emulator_args(self) -> tuple[str, ...]:
        return self._args

    def capture(self) -> PowerCapture:
        if self._trace_path is None:
            raise InternalError("The emulated monitor was not armed")
        return self.analyze(read_trace(self._trace_path))

    def analyze(self, trace: PluginTrace) -> PowerCapture:
        snaps = trace.snapshots
        opens = [i for i, s in enumerate(snaps) if s.boundary == _OPEN]
        closes = [i for i, s in enumerate(snaps) if s.boundary == _CLOSE]
        if not opens:
            raise PowerCaptureError(
                IssueCode.POWER_GATE_MISSING,
                "the power firmware never reached its gate (no aidge_power_gate_open)",
                hint="The firmware crashed before its window; see the UART log.",
            )
        first = opens[0]
        after = [i for i in closes if i > first]
        if not after:
            raise PowerCaptureError(
                IssueCode.POWER_GATE_UNCLOSED,
                "the gate opened but never closed (no aidge_power_gate_close)",
                hint="The power run was cut short (timeout?) or the firmware hung.",
            )
        last = after[0]
        window = snaps[last].minus(snaps[first])
        inside = snaps[first : last + 1]
        forwards = sum(1 for s in inside if s.boundary == _FORWARD)
        energy = self.model.energy_j(window)
        base = self.model.time_base(window)
        duration = base.cycles / self.cpu_hz
        layer_energy: dict[str, float] = {}
        if self._layers and any(s.boundary == _CYCLES for s in inside):
            wanted = {c: c for c in PLUGIN_COUNTERS}
            local = PluginTrace(trace.boundaries, tuple(_renumber(inside)), None)
            rows = per_forward_layer_rows(local, len(self._layers), 0, wanted)
            for name, per_forward in zip(self._layers, rows, strict=True):
                energies = [self.model.energy_j(r) for r in per_forward]
                if energies:  # a layer never timed has no energy figure (not 0)
                    layer_energy[name] = stats.median(energies)
        return PowerCapture(
            energy_j=energy,
            duration_s=duration,
            duration_resolution_s=1.0 / self.cpu_hz,
            samples=0,
            sample_rate_hz=None,
            identity=self.identity,
            provenance=Provenance.ESTIMATED,
            trace=self._trace(inside, snaps[first]),
            layer_energy_j=layer_energy,
            inferences_seen=forwards,
            uncertainty_factor=self.model.uncertainty_factor,
            basis=f"{self.model.basis}; time = {base.label} ÷ {self.cpu_hz / 1e6:g} MHz, the "
            "same cycles the energy prices",
            notes=(f"{window['instructions']} emulated instructions in the window",),
            raw_files=(self._trace_path,) if self._trace_path is not None else (),
        )

    def _trace(self, inside: Sequence[Snapshot], origin: Snapshot) -> PowerTrace:
        """Power over the window, one point per snapshot interval (layers, forwards)."""
        times: list[float] = []
        powers: list[float] = []
        time_base = self.model.time_base
        for a, b in itertools.pairwise(inside):
            delta = b.minus(a)
            cycles = time_base(delta).cycles
            if cycles <= 0:
                continue
            times.append(time_base(a.minus(origin)).cycles / self.cpu_hz)
            powers.append(self.model.energy_j(delta) / (cycles / self.cpu_hz))
        step = max(1, len(times) // TRACE_POINTS)
        end = time_base(inside[-1].minus(origin)).cycles / self.cpu_hz
        return PowerTrace(tuple(times[::step]), tuple(powers[::step]), 0.0, end)


def _renumber(inside: Sequence[Snapshot]) -> list[Snapshot]:
    """Snapshots of the window as the per-layer splitter expects (forward = 0, reads = 1)."""
    out = []
    for s in inside:
        if s.boundary == _FORWARD:
            out.append(Snapshot(s.seq, 0, s.counts))
        elif s.boundary == _CYCLES:
            out.append(Snapshot(s.seq, 1, s.counts))
    return out


class EmulatedMonitorKind(MonitorKind):
    reads = (
        "energy model of an emulated board's core driven by the emulated PMU counts, gated "
        "by the power firmware's gate functions; per inference and per layer"
    )
    provenance = "estimated"

    @classmethod
    def on_this_machine(cls, here: ThisMachine) -> list[ToolCheck]:
        boards = boards_with_models()
        return [
            ToolCheck(
                "emulated",
                bool(boards),
                f"energy models of {', '.join(boards)}" if boards else "no board has a model",
            )
        ]

    @classmethod
    def preflight(
        cls, source: PowerSource, config: DeployConfig, target_cls: type, caps: TargetCaps
    ) -> list[ToolCheck]:
        board = getattr(target_cls, "board_name", None)
        if not caps.emulated or board not in boards_with_models():
            raise ConfigError(
                f"--power emulated needs an emulated board with an energy model (not {config.target})",
                hint=f"Boards with a model: {', '.join(boards_with_models())}.",
            )
        return [ToolCheck("emulated", True, f"energy model of {board}")]

    @classmethod
    def create(
        cls, source: PowerSource, config: DeployConfig, target: Any, caps: TargetCaps
    ) -> PowerMonitor:
        board = getattr(target, "board", None)
        if board is None or not caps.emulated:
            raise ConfigError(
                "--power emulated needs an emulated (QEMU) board",
                hint="Use it with --target mps2-an386, mps3-an547 or netduinoplus2; on other "
                "targets measure with joulescope, hwmon or rapl.",
            )
        return EmulatedEnergyMonitor(source, board.name, board.cpu_hz, timing=config.timing)


__all__ = [
    "GATE_CLOSE",
    "GATE_OPEN",
    "EmulatedEnergyMonitor",
    "EmulatedMonitorKind",
    "gate_symbols",
]
