"""The counter catalogue (data) and the selection of counters: presets, names, typos, reasons."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from aidge_deploy.errors import ConfigError
from aidge_deploy.profiling.counters import (
    ALL_PRESET,
    CounterDomain,
    CounterKind,
    load_catalogue,
    select_counters,
)
from aidge_deploy.results import Provenance

UNITS = {"cycles", "instructions", "events", "ns"}


def test_catalogue_is_consistent() -> None:
    cat = load_catalogue()
    names = [(c.domain, n.lower()) for c in cat.counters for n in (c.name, *c.aliases)]
    assert len(names) == len(set(names)), "a name or alias is used twice in one domain"
    for counter in cat.counters:
        assert counter.unit in UNITS, counter
        assert counter.group and counter.description
        assert (
            counter.slots
            == (
                1
                if counter.kind in (CounterKind.PMU, CounterKind.HARDWARE, CounterKind.HW_CACHE)
                else 0
            )
            or counter.name == "CPU_CYCLES"
        )
        if counter.domain is CounterDomain.ARMV8M_PMU:
            assert counter.event.code is not None and counter.kind is CounterKind.PMU
        elif counter.domain is CounterDomain.LINUX_PERF:
            assert counter.event.perf_type in (0, 1, 3) and counter.event.perf_config is not None
        else:
            assert counter.event.plugin and counter.kind is CounterKind.EMULATED
    for domain in CounterDomain:
        presets = cat.presets(domain)
        members = {c.name for c in cat.in_domain(domain)}
        assert {"default", ALL_PRESET} <= set(presets)
        for preset, listed in presets.items():
            assert set(listed) <= members, (domain, preset)
            assert preset not in {n.lower() for n in members}, "a preset shadows a counter"
    assert cat.provenance == {
        CounterDomain.ARMV8M_PMU: Provenance.SILICON,
        CounterDomain.LINUX_PERF: Provenance.HOST,
        CounterDomain.EMULATED: Provenance.EMULATED,
    }


def test_event_numbers_are_the_architectural_ones() -> None:
    cat = load_catalogue()
    pmu = {c.name: c.event.code for c in cat.in_domain("armv8m-pmu")}
    assert pmu["CPU_CYCLES"] == 0x11 and pmu["INST_RETIRED"] == 0x08
    assert pmu["LD_RETIRED"] == 0x06 and pmu["ST_RETIRED"] == 0x07
    assert pmu["BR_RETIRED"] == 0x21 and pmu["BR_MIS_PRED"] == 0x10
    assert pmu["STALL_FRONTEND"] == 0x23 and pmu["STALL_BACKEND"] == 0x24
    assert pmu["MEM_ACCESS"] == 0x13 and pmu["L1D_CACHE_REFILL"] == 0x03
    assert pmu["EXC_TAKEN"] == 0x09 and pmu["MVE_INST_RETIRED"] == 0x200
    assert len(set(pmu.values())) == len(pmu), "two PMU events share a number"
    perf = {c.name: (c.event.perf_type, c.event.perf_config) for c in cat.in_domain("linux-perf")}
    assert perf["instructions"] == (0, 1) and perf["task-clock"] == (1, 1)
    assert perf["page-faults"] == (1, 2) and perf["L1-dcache-load-misses"] == (3, 0x10000)


def test_catalogue_file_is_versioned_data() -> None:
    doc = json.loads(
        resources.files("aidge_deploy.profiling").joinpath("data/counters.json").read_text()
    )
    assert doc["schema"] == "aidge-deploy.counter-catalogue" and doc["schema_version"] == 1


def test_presets_and_explicit_names_expand_in_order_without_duplicates() -> None:
    sel = select_counters("default, instructions, task-clock", "linux-perf")
    assert sel.names[:3] == ("task-clock", "page-faults", "context-switches")
    assert sel.names.count("instructions") == 1 and sel.names.count("task-clock") == 1
    sel = select_counters(["CYCLES", "arm_pmu_inst_retired", "mve"], CounterDomain.ARMV8M_PMU)
    assert sel.names[:2] == ("CPU_CYCLES", "INST_RETIRED")
    assert "MVE_INT_MAC_RETIRED" in sel.names
    every = select_counters("all", "emulated")
    assert every.names == ("emu-instructions", "emu-loads", "emu-stores", "emu-branches-taken")
    grouped = select_counters("os", "linux-perf")  # a catalogue group is a preset too
    assert set(grouped.names) == {
        "page-faults",
        "context-switches",
        "cpu-migrations",
        "minor-faults",
        "major-faults",
    }


def test_typo_gives_did_you_mean() -> None:
    with pytest.raises(ConfigError) as info:
        select_counters("task-clock,pagefaults", "linux-perf")
    assert "Did you mean 'page-faults'" in info.value.message
    with pytest.raises(ConfigError) as info:
        select_counters("INST_RETIRD", "armv8m-pmu")
    assert "INST_RETIRED" in info.value.message
    with pytest.raises(ConfigError) as info:
        select_counters("deafult", "emulated")
    assert "'default'" in info.value.message


def test_counter_of_another_domain_is_named_as_such() -> None:
    with pytest.raises(ConfigError) as info:
        select_counters("task-clock", "armv8m-pmu")
    assert "linux-perf" in info.value.message and "armv8m-pmu" in info.value.message


def test_empty_selection_is_an_error() -> None:
    with pytest.raises(ConfigError):
        select_counters(" , ", "linux-perf")


def test_unavailable_counters_keep_their_reason() -> None:
    available = {"task-clock": None, "page-faults": None, "instructions": "ENOENT: no PMU"}
    sel = select_counters("task-clock,page-faults,instructions,cycles", "linux-perf", available)
    assert [c.name for c in sel.available] == ["task-clock", "page-faults"]
    assert sel.unavailable["instructions"] == "ENOENT: no PMU"
    assert "not offered" in sel.unavailable["cycles"]
    assert select_counters("default", "linux-perf").unavailable == {}
