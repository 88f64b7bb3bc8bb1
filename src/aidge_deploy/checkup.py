"""What ``aidge-deploy doctor`` reports: whether each registered thing works on this machine.

Everything comes from the registries: each target says, for each way of running it
(``variants``: ``--cross-compile``, a flash method, a Docker image), what it needs here
(``preflight``, the very checks that stop a run in Preflight) and what only a run can provide
(``run_needs``); each flasher, counter source and power monitor says what it needs. A row is
"ready" only when every check passed; otherwise it says what is missing and how to get it, in
the words a run that needs it fails with (``readiness.missing_text``). Targets whose rows are
the same (same class of needs and results) share one row.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass

from aidge_deploy.extensions import registries
from aidge_deploy.readiness import ToolCheck, missing_text


@dataclass(frozen=True)
class Readiness:
    """One way of using something registered, on this machine."""

    #: what: ``k230/ssh --cross-compile``, ``jlink``, ``hwmon``
    subject: str
    checks: tuple[ToolCheck, ...] = ()
    #: what a run must provide itself (a board's address, a probe plugged in)
    run_needs: tuple[str, ...] = ()
    #: what it is or does, for people
    note: str = ""

    @property
    def ready(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def status(self) -> str:
        """``ready``, or ``missing X (why)``: the words of a run's PreflightError."""
        return "ready" if self.ready else f"missing {missing_text(self.checks)[0]}"

    @property
    def how(self) -> str:
        """How to get what is missing ("" when ready)."""
        return "" if self.ready else missing_text(self.checks)[1]


@dataclass(frozen=True)
class Checkup:
    packages: tuple[ToolCheck, ...]
    targets: tuple[Readiness, ...]
    #: exporting for a target (``profile``): its BSP
    exports: tuple[Readiness, ...]
    flashers: tuple[Readiness, ...]
    counters: tuple[Readiness, ...]
    monitors: tuple[Readiness, ...]
    #: the registered output protocols (they need nothing of this machine)
    protocols: tuple[str, ...]
    #: entry points that failed to load: (kind, name, error)
    broken: tuple[tuple[str, str, str], ...]

    @property
    def missing(self) -> int:
        """Rows of targets and exports that are not ready (what ``doctor`` exits 1 for)."""
        return sum(not r.ready for r in (*self.targets, *self.exports))


def _package_check(name: str) -> ToolCheck:
    try:
        version = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ToolCheck(name, False, "not installed", f"pip install {name}")
    return ToolCheck(name, True, version)


def _grouped(rows: list[tuple[str, str, Readiness]]) -> tuple[Readiness, ...]:
    """Rows of (target, "backend variant", readiness) with equal needs and results merged:
    ``raspberrypi, jetson-agx, ... /ssh --cross-compile``."""
    groups: dict[tuple[object, ...], list[str]] = {}
    first: dict[tuple[object, ...], Readiness] = {}
    for target, way, readiness in rows:
        key: tuple[object, ...] = (
            way,
            tuple((c.name, c.ok, c.detail if not c.ok else "", c.hint) for c in readiness.checks),
            readiness.run_needs,
            readiness.note,
        )
        groups.setdefault(key, []).append(target)
        first.setdefault(key, readiness)
    out = []
    for key, targets in groups.items():
        way = str(key[0])
        sample = first[key]
        names = ", ".join(targets)
        out.append(Readiness(f"{names} /{way}", sample.checks, sample.run_needs, sample.note))
    return tuple(out)


def target_readiness() -> tuple[Readiness, ...]:
    """Every registered ``(target, backend)`` and variant: ready here, or what is missing."""
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.registry import REMOTE_BACKENDS, TARGETS

    rows: list[tuple[str, str, Readiness]] = []
    for cls in TARGETS.all().values():
        for label, values in cls.variants().items():
            way = f"{cls.backend_name} {label}".strip()
            try:
                target = cls(
                    DeployConfig(target=cls.target_name, backend=cls.backend_name, **values)
                )
                readiness = Readiness(
                    way, tuple(target.preflight()), tuple(target.run_needs()), cls.description
                )
            except Exception as exc:  # a plug-in's target that cannot even say: a row too
                readiness = Readiness(
                    way,
                    (ToolCheck(f"{cls.target_name}/{way}", False, f"its needs: {exc}"),),
                )
            rows.append((cls.target_name, way, readiness))
    targets = sorted({cls.target_name for cls in TARGETS.registered().values()})
    for name, backend in REMOTE_BACKENDS.all().items():
        remote = backend(targets[0] if targets else "host")
        readiness = Readiness(
            name, tuple(remote.preflight()), tuple(remote.run_needs()), backend.description
        )
        rows += [(target, name, readiness) for target in targets]
    return _grouped(rows)


def export_readiness() -> tuple[Readiness, ...]:
    """What exporting for each target needs here beyond the Aidge packages (its BSP)."""
    from aidge_deploy.bspcheck import bsp_check
    from aidge_deploy.registry import TARGETS

    rows: list[tuple[str, str, Readiness]] = []
    seen: set[str] = set()
    for cls in TARGETS.all().values():
        if cls.target_name in seen:
            continue
        seen.add(cls.target_name)
        try:
            check = bsp_check(cls(None).hardware_target)
        except Exception:  # a hardware model that cannot be built here has no BSP to check
            continue
        if check is not None:
            rows.append((cls.target_name, "profile (export)", Readiness("", (check,))))
    return tuple(Readiness(f"{target}: profile (export)", r.checks) for target, _, r in rows)


def flasher_readiness() -> tuple[Readiness, ...]:
    from aidge_deploy.flash.registry import FLASHERS

    return tuple(
        Readiness(name, tuple(cls.needs()), (), (cls.__doc__ or "").strip().splitlines()[0])
        for name, cls in FLASHERS.all().items()
    )


def counter_readiness() -> tuple[Readiness, ...]:
    from aidge_deploy.profiling.capability import COUNTER_SOURCES

    return tuple(
        Readiness(
            f"{name} ({cls.counter_domain.value})",
            tuple(cls.counter_needs()),
            cls.counter_run_needs,
            cls.counts_where,
        )
        for name, cls in COUNTER_SOURCES.all().items()
    )


def monitor_readiness() -> tuple[Readiness, ...]:
    from aidge_deploy.power.monitors import monitor_checks
    from aidge_deploy.power.registry import POWER_MONITORS, ThisMachine
    from aidge_deploy.registry import TARGETS
    from aidge_deploy.targetcaps import target_caps

    targets = tuple((c.target_name, c.backend_name, c) for c in TARGETS.all().values())
    caps = {(t, b): target_caps(c) for t, b, c in targets}
    checks = monitor_checks(ThisMachine(targets=targets, caps=caps))
    return tuple(
        Readiness(kind.syntax(), tuple(checks[name]), (), kind.reads)
        for name, kind in POWER_MONITORS.all().items()
    )


def checkup() -> Checkup:
    """The whole report (imports every registered thing, and Aidge for the hardware models)."""
    from aidge_deploy.modelexport import load_plugins
    from aidge_deploy.protocols.registry import PROTOCOLS

    load_plugins()
    protocols = tuple(PROTOCOLS.all())
    from aidge_deploy.report.metadata import PACKAGES

    packages = tuple(_package_check(p) for p in PACKAGES if p != "aidge-deploy")
    targets, exports = target_readiness(), export_readiness()
    flashers, counters, monitors = flasher_readiness(), counter_readiness(), monitor_readiness()
    broken = tuple(
        (registry.kind, name, error)
        for registry in registries()
        for name, error in registry.failures.items()
    )
    return Checkup(packages, targets, exports, flashers, counters, monitors, protocols, broken)


__all__ = ["Checkup", "Readiness", "checkup"]
