"""The counter catalogue and the selection of counters a run asks for.

Counters are data (``profiling/data/counters.json``), not code: the Armv8.1-M PMU events,
the Linux ``perf_event`` events and the counters of our QEMU plugin, each with its event
encoding, unit, group and counting domain. A target counts exactly one domain; a user
asks for presets (``default``, a group name, ``all``) and/or explicit names, and gets back
which of them the target can count — and *why* the others cannot be counted, so a missing
counter is reported as unavailable, never as a zero. Typos fail early with a suggestion.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property, lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Any

from aidge_deploy.errors import ConfigError
from aidge_deploy.metrics import Provenance


class CounterDomain(StrEnum):
    """Who counts: the counters of one domain share an encoding and a provenance."""

    LINUX_PERF = "linux-perf"  # perf_event_open on a Linux host or board
    ARMV8M_PMU = "armv8m-pmu"  # the PMU of an Armv8.1-M core, programmed by the firmware
    EMULATED = "emulated"  # the aidge_pmu QEMU TCG plugin


class CounterKind(StrEnum):
    """How a counter is implemented (decides whether it takes a hardware slot)."""

    PMU = "pmu"  # Armv8-M PMU event counter
    HARDWARE = "hardware"  # PERF_TYPE_HARDWARE
    HW_CACHE = "hw-cache"  # PERF_TYPE_HW_CACHE
    SOFTWARE = "software"  # PERF_TYPE_SOFTWARE: kernel-maintained, no PMU slot
    EMULATED = "emulated"  # counted by the emulator plugin, all at once


#: Name of the preset holding every counter of a domain.
ALL_PRESET = "all"
#: Prefix CMSIS puts in front of the PMU event names (accepted and ignored).
_CMSIS_PREFIX = "arm_pmu_"


@dataclass(frozen=True)
class CounterEvent:
    """The encoding of one event: a PMU event number, a perf (type, config) or a plugin key."""

    code: int | None = None
    perf_type: int | None = None
    perf_config: int | None = None
    plugin: str | None = None


@dataclass(frozen=True)
class Counter:
    """One countable event of the catalogue."""

    name: str
    domain: CounterDomain
    kind: CounterKind
    event: CounterEvent
    unit: str
    group: str
    #: hardware counter slots it occupies in a pass (0: software, emulated, fixed cycles)
    slots: int
    description: str
    aliases: tuple[str, ...] = ()
    #: what the counter measures, when another figure measures the same thing (the
    #: emulator's instruction count and the firmware's instruction-exact counter are both
    #: "instructions"): a report charts one quantity once
    quantity: str | None = None


@dataclass(frozen=True)
class Catalogue:
    """Every known counter, the curated presets and the provenance of each domain."""

    counters: tuple[Counter, ...]
    curated_presets: Mapping[CounterDomain, Mapping[str, tuple[str, ...]]]
    provenance: Mapping[CounterDomain, Provenance]
    domain_descriptions: Mapping[CounterDomain, str] = field(default_factory=dict)
    #: width of the domain's counters (32: the Armv8-M PMU; 64: perf_event, the plugin)
    counter_bits: Mapping[CounterDomain, int] = field(default_factory=dict)

    @cached_property
    def lookup_tables(self) -> Mapping[CounterDomain, Mapping[str, Counter]]:
        """Per domain: lower-cased name or alias -> counter (built once)."""
        tables: dict[CounterDomain, dict[str, Counter]] = {d: {} for d in CounterDomain}
        for counter in self.counters:
            for name in (counter.name, *counter.aliases):
                tables[counter.domain][_key(name)] = counter
        return MappingProxyType({d: MappingProxyType(t) for d, t in tables.items()})

    def in_domain(self, domain: CounterDomain | str) -> tuple[Counter, ...]:
        dom = CounterDomain(domain)
        return tuple(c for c in self.counters if c.domain is dom)

    def get(self, name: str, domain: CounterDomain | str) -> Counter:
        """The counter called ``name`` (or one of its aliases) in ``domain``."""
        found = _lookup(self, CounterDomain(domain)).get(_key(name))
        if found is None:
            raise ConfigError(
                f"Unknown {CounterDomain(domain).value} counter {name!r}",
                hint="List them with aidge_deploy.profiling.counters.load_catalogue().",
            )
        return found

    def presets(self, domain: CounterDomain | str) -> Mapping[str, tuple[str, ...]]:
        """Curated presets, one preset per group (members in catalogue order), and ``all``."""
        dom = CounterDomain(domain)
        members = self.in_domain(dom)
        out: dict[str, tuple[str, ...]] = dict(self.curated_presets.get(dom, {}))
        for counter in members:
            if counter.group not in out:
                out[counter.group] = tuple(c.name for c in members if c.group == counter.group)
        out[ALL_PRESET] = tuple(c.name for c in members)
        return MappingProxyType(out)


def _key(name: str) -> str:
    key = name.strip().lower()
    return key.removeprefix(_CMSIS_PREFIX)


def _lookup(catalogue: Catalogue, domain: CounterDomain) -> Mapping[str, Counter]:
    return catalogue.lookup_tables[domain]


def _int(value: Any) -> int:
    return int(value, 0) if isinstance(value, str) else int(value)


def parse_catalogue(doc: Mapping[str, Any]) -> Catalogue:
    """Build a catalogue from its JSON document (see ``data/counters.json``)."""
    counters = []
    for entry in doc["counters"]:
        ev = entry["event"]
        event = CounterEvent(
            code=_int(ev["code"]) if "code" in ev else None,
            perf_type=_int(ev["type"]) if "type" in ev else None,
            perf_config=_int(ev["config"]) if "config" in ev else None,
            plugin=ev.get("plugin"),
        )
        counters.append(
            Counter(
                name=entry["name"],
                domain=CounterDomain(entry["domain"]),
                kind=CounterKind(entry["kind"]),
                event=event,
                unit=entry["unit"],
                group=entry["group"],
                slots=int(entry["slots"]),
                description=entry["description"],
                aliases=tuple(entry.get("aliases", ())),
                quantity=entry.get("quantity"),
            )
        )
    presets = {
        CounterDomain(dom): MappingProxyType({k: tuple(v) for k, v in table.items()})
        for dom, table in doc.get("presets", {}).items()
    }
    domains = doc.get("domains", {})
    return Catalogue(
        counters=tuple(counters),
        curated_presets=MappingProxyType(presets),
        provenance=MappingProxyType(
            {CounterDomain(d): Provenance(v["provenance"]) for d, v in domains.items()}
        ),
        domain_descriptions=MappingProxyType(
            {CounterDomain(d): str(v.get("description", "")) for d, v in domains.items()}
        ),
        counter_bits=MappingProxyType(
            {CounterDomain(d): int(v["counter_bits"]) for d, v in domains.items()}
        ),
    )


@lru_cache(maxsize=1)
def load_catalogue() -> Catalogue:
    """The catalogue shipped with the package (read once)."""
    text = (
        resources.files("aidge_deploy.profiling")
        .joinpath("data/counters.json")
        .read_text(encoding="utf-8")
    )
    return parse_catalogue(json.loads(text))


@dataclass(frozen=True)
class CounterSelection:
    """What was asked for in one domain, and which of it cannot be counted (with why)."""

    domain: CounterDomain
    #: every requested counter, presets expanded, duplicates removed, in request order
    requested: tuple[Counter, ...]
    #: counter name -> reason it cannot be counted on this target
    unavailable: Mapping[str, str] = field(default_factory=dict)

    @property
    def available(self) -> tuple[Counter, ...]:
        return tuple(c for c in self.requested if c.name not in self.unavailable)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.requested)


def _tokens(spec: str | Sequence[str]) -> list[str]:
    items: Iterable[str] = [spec] if isinstance(spec, str) else spec
    out: list[str] = []
    for item in items:
        out.extend(t.strip() for t in str(item).split(",") if t.strip())
    return out


def _unknown(token: str, domain: CounterDomain, catalogue: Catalogue) -> ConfigError:
    presets = catalogue.presets(domain)
    for other in CounterDomain:
        if other is not domain and _key(token) in _lookup(catalogue, other):
            return ConfigError(
                f"Counter {token!r} belongs to the {other.value} domain; this target counts "
                f"{domain.value} events",
                hint=f"Presets of {domain.value}: {', '.join(presets)}.",
            )
    names = {_key(n): n for c in catalogue.in_domain(domain) for n in (c.name, *c.aliases)}
    names.update({p: p for p in presets})
    close = difflib.get_close_matches(_key(token), list(names), n=3, cutoff=0.6)
    suggestion = f" Did you mean {' or '.join(repr(names[c]) for c in close)}?" if close else ""
    return ConfigError(
        f"Unknown {domain.value} counter or preset {token!r}.{suggestion}",
        hint=f"Presets: {', '.join(presets)}; or name counters explicitly "
        f"(e.g. {', '.join(repr(c.name) for c in catalogue.in_domain(domain)[:3])}).",
    )


def select_counters(
    spec: str | Sequence[str],
    domain: CounterDomain | str,
    available: Mapping[str, str | None] | None = None,
    *,
    catalogue: Catalogue | None = None,
) -> CounterSelection:
    """Expand presets and names into a selection checked against what the target can count.

    ``spec`` is a comma-separated string or a sequence of presets / counter names (case
    does not matter; CMSIS ``ARM_PMU_`` prefixes are accepted). ``available`` maps counter
    name -> ``None`` (countable) or the reason it is not; a counter absent from it is
    "not offered by this target". ``None`` means the target did not say (all countable).
    Raises ``ConfigError`` (with a did-you-mean) for anything not in the catalogue.
    """
    cat = catalogue if catalogue is not None else load_catalogue()
    dom = CounterDomain(domain)
    table = _lookup(cat, dom)
    presets = cat.presets(dom)
    chosen: dict[str, Counter] = {}
    tokens = _tokens(spec)
    if not tokens:
        raise ConfigError(
            "No counters requested", hint=f"Presets of {dom.value}: {', '.join(presets)}."
        )
    for token in tokens:
        key = _key(token)
        if key in presets:
            for name in presets[key]:
                counter = table[_key(name)]
                chosen.setdefault(counter.name, counter)
        elif key in table:
            counter = table[key]
            chosen.setdefault(counter.name, counter)
        else:
            raise _unknown(token, dom, cat)
    unavailable: dict[str, str] = {}
    if available is not None:
        for name in chosen:
            if name not in available:
                unavailable[name] = f"not offered by this target ({dom.value})"
            elif available[name] is not None:
                unavailable[name] = str(available[name])
    return CounterSelection(
        domain=dom, requested=tuple(chosen.values()), unavailable=MappingProxyType(unavailable)
    )


__all__ = [
    "ALL_PRESET",
    "Catalogue",
    "Counter",
    "CounterDomain",
    "CounterEvent",
    "CounterKind",
    "CounterSelection",
    "load_catalogue",
    "parse_catalogue",
    "select_counters",
]
