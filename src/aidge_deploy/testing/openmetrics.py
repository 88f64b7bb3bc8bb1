"""The OpenMetrics text file of a pytest session's runs, for dashboards.

Every headline figure of every run becomes a gauge sample labelled with the test, the run,
the target, the lab board and *the figure's own* provenance (a run on an emulated board
has emulated instruction counts, static sizes and estimated times). Values are in the base
units OpenMetrics names — seconds, bytes, joules, watts — with ``# UNIT`` and the unit as
the family name's suffix, as the format requires; counts (instructions, cycles, events)
have no unit. Rendering is ``prometheus_client``'s OpenMetrics exposition.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

#: our unit -> (OpenMetrics unit, factor to it)
BASE_UNITS: dict[str, tuple[str, float]] = {
    "s": ("seconds", 1.0),
    "ms": ("seconds", 1e-3),
    "us": ("seconds", 1e-6),
    "ns": ("seconds", 1e-9),
    "B": ("bytes", 1.0),
    "bytes": ("bytes", 1.0),
    "ratio": ("ratio", 1.0),
    "J": ("joules", 1.0),
    "mJ": ("joules", 1e-3),
    "uJ": ("joules", 1e-6),
    "W": ("watts", 1.0),
    "mW": ("watts", 1e-3),
    "uW": ("watts", 1e-6),
}
PREFIX = "aidge_"
LABELS = ("test", "run", "target", "board", "provenance")

#: one test's runs: (test id, [{"run", "target", "board", "figures": [{name, value, unit,
#: provenance}]}]), as the plugin collects them
Entry = tuple[str, Sequence[Mapping[str, Any]]]


def metric_name(metric: str, unit: str) -> tuple[str, str, float]:
    """The OpenMetrics family name, unit and scale factor of one of our figures."""
    base = re.sub(r"[^a-zA-Z0-9_]", "_", metric).strip("_").lower()
    om_unit, factor = BASE_UNITS.get(unit, ("", 1.0))
    return f"{PREFIX}{base}", om_unit, factor


class _Runs(Collector):
    def __init__(self, entries: Sequence[Entry]) -> None:
        self.entries = entries

    def collect(self) -> Iterator[Metric]:
        families: dict[str, GaugeMetricFamily] = {}
        for nodeid, runs in self.entries:
            for run in runs:
                for fig in run["figures"]:
                    if fig.get("value") is None:
                        continue
                    name, om_unit, factor = metric_name(str(fig["name"]), str(fig["unit"]))
                    # a family has one unit: a figure in another unit is a family of its own
                    key = f"{name}_{om_unit}" if om_unit else name
                    family = families.get(key)
                    if family is None:
                        family = GaugeMetricFamily(
                            name,
                            f"aidge-deploy {fig['name']} per run"
                            + ("" if om_unit else f" ({fig['unit']})"),
                            labels=LABELS,
                            unit=om_unit,
                        )
                        families[key] = family
                    family.add_metric(
                        [
                            nodeid,
                            str(run["run"]),
                            str(run["target"]),
                            str(run.get("board") or ""),
                            str(fig["provenance"]),
                        ],
                        float(fig["value"]) * factor,
                    )
        yield from families.values()


def render_openmetrics(entries: Iterable[Entry]) -> str:
    """OpenMetrics text (ending with ``# EOF``) of the runs' figures."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Runs(list(entries)))
    return generate_latest(registry).decode("utf-8")


def write_openmetrics(path: Path, entries: Iterable[Entry]) -> Path:
    """Write the file atomically (a dashboard never reads half of it, nor an empty one)."""
    text = render_openmetrics(entries)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path
