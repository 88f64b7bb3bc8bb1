"""The OpenMetrics text file of a pytest session's runs, for dashboards.

Every headline metric of every run becomes a gauge sample labelled with the test, the run,
the target and the provenance. Times and energies are converted to the base units
OpenMetrics names (seconds, joules, watts, bytes); counts keep their name and carry their
unit as a label. Rendering is ``prometheus_client``'s OpenMetrics exposition.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

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
    "ratio": ("ratio", 1.0),
    "J": ("joules", 1.0),
    "mJ": ("joules", 1e-3),
    "uJ": ("joules", 1e-6),
    "W": ("watts", 1.0),
    "mW": ("watts", 1e-3),
    "uW": ("watts", 1e-6),
}
PREFIX = "aidge_"
_PROPERTY = re.compile(r"^aidge\.([^.]+)\.(.+)\[(.*)\]$")
LABELS = ("test", "run", "target", "provenance", "unit")


def metric_name(metric: str, unit: str) -> tuple[str, str, float]:
    """The OpenMetrics family name, unit and scale factor of one of our metrics."""
    base = re.sub(r"[^a-zA-Z0-9_]", "_", metric).strip("_").lower()
    om_unit, factor = BASE_UNITS.get(unit, ("", 1.0))
    return f"{PREFIX}{base}", om_unit, factor


class _Runs(Collector):
    def __init__(self, entries: Sequence[tuple[str, Sequence[tuple[str, object]]]]) -> None:
        self.entries = entries

    def collect(self) -> Iterator[Metric]:
        families: dict[str, GaugeMetricFamily] = {}
        for nodeid, props in self.entries:
            facts: dict[tuple[str, str], str] = {}
            for key, value in props:
                parts = key.split(".")
                if len(parts) == 3:
                    facts[(parts[1], parts[2])] = str(value)
            for key, value in props:
                match = _PROPERTY.match(key)
                if match is None:
                    continue
                run, metric, unit = match.groups()
                name, om_unit, factor = metric_name(metric, unit)
                family = families.get(name)
                if family is None:
                    family = GaugeMetricFamily(
                        name, f"aidge-deploy {metric} per run", labels=LABELS, unit=om_unit
                    )
                    families[name] = family
                family.add_metric(
                    [
                        nodeid,
                        run,
                        facts.get((run, "target"), ""),
                        facts.get((run, "provenance"), ""),
                        unit,
                    ],
                    float(value) * factor,  # type: ignore[arg-type]
                )
        yield from families.values()


def render_openmetrics(entries: Iterable[tuple[str, Sequence[tuple[str, object]]]]) -> str:
    """OpenMetrics text (ending with ``# EOF``) of ``(test id, properties)`` entries."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Runs(list(entries)))
    return generate_latest(registry).decode("utf-8")


def write_openmetrics(
    path: Path, entries: Iterable[tuple[str, Sequence[tuple[str, object]]]]
) -> Path:
    """Write the file atomically (a dashboard never reads half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(render_openmetrics(entries), encoding="utf-8")
    os.replace(tmp, path)
    return path
