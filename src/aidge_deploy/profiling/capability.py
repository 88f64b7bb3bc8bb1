"""Counter sources: what counts events around a run, composed with the target it counts for.

A counter source (``CounterSource``) says which counting domain it has (Linux perf, the
Armv8-M PMU programmed by its firmware, or the QEMU plugin), how many slot-taking counters
fit in one pass, what it can count right now (and why not the rest), how to run one pass (a
complete run of the program with that pass's counters, reduced to per-layer values when the
target can attribute them to layers, else whole-run figures), where it counts and what it
needs on this machine. Sources are registered by name in one ``extensions.Registry`` (entry
points ``aidge_deploy.counters``). A target does not inherit one: its implementation names
the source its kind counts with (``DeployTarget.counts_with``), a board's record may name
one for a kind that has none (``TargetSpec.counters``), and a run builds the source with
the target (``targetcaps.counter_source``): ``source.target`` is whom it counts for.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from aidge_deploy.extensions import Registry
from aidge_deploy.profiling.counters import CounterDomain
from aidge_deploy.readiness import ToolCheck

if TYPE_CHECKING:
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.lifecycle import BuildResult, DeployContext
    from aidge_deploy.profiling.passes import CounterPass, PassResult


class Counted(Protocol):
    """What every source may ask of its target: the run's config."""

    config: DeployConfig


class CounterSource[T: Counted](ABC):
    """Counts events for one target (``T``: the target class it is written for)."""

    #: the registered name (written by the registry: the entry point's name)
    counter_source: ClassVar[str]
    #: the catalogue domain of every counter this source counts
    counter_domain: ClassVar[CounterDomain]
    #: hardware slots per pass (counters with ``slots == 0`` do not use any)
    max_counters_per_pass: ClassVar[int]
    #: where the counting happens, for people (``doctor``, the docs)
    counts_where: ClassVar[str] = ""
    #: what a run needs that only the run can provide (on the board, a device)
    counter_run_needs: ClassVar[tuple[str, ...]] = ()

    def __init__(self, target: T) -> None:
        self.target = target

    @property
    def config(self) -> DeployConfig:
        """The run's config: the target's."""
        return self.target.config

    @classmethod
    def counter_needs(cls) -> list[ToolCheck]:
        """What counting needs on this machine (``doctor``; Preflight of a run with counters)."""
        return []

    @abstractmethod
    def available_counters(self) -> Mapping[str, str | None]:
        """Counter name -> ``None`` if countable here, else the reason it is not."""

    @abstractmethod
    def run_counter_pass(
        self, ctx: DeployContext, build: BuildResult, counter_pass: CounterPass
    ) -> PassResult:
        """Run the program once with ``counter_pass``'s counters and return their values.

        Each call is a complete run (warm-up included). Counters the kernel, firmware or
        emulator refused in this run go to ``PassResult.unavailable`` with the reason.
        Raises ``ExecutionError`` when the program itself fails.
        """


_S = TypeVar("_S", bound=type[CounterSource[Any]])


#: counter sources by name (entry points ``aidge_deploy.counters``)
COUNTER_SOURCES: Registry[type[CounterSource[Any]]] = Registry(
    "counters", CounterSource, name_attribute="counter_source"
)


def register_counter_source(name: str) -> Callable[[_S], _S]:
    """Class decorator: register a ``CounterSource`` class as the source ``name``."""
    return COUNTER_SOURCES.registering(name)


__all__ = [
    "COUNTER_SOURCES",
    "Counted",
    "CounterSource",
    "register_counter_source",
]
