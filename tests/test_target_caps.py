"""A target's capabilities are data (``aidge_deploy.targetcaps``): derived from its record,
its backend's declared ``reach`` and its mixins, in one place, for the built-in boards, a
third party's class and a record composing a counter source."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import pytest

from aidge_deploy.config import DeployConfig
from aidge_deploy.configcheck import check_deploy_config
from aidge_deploy.errors import ConfigError
from aidge_deploy.metrics import Provenance
from aidge_deploy.power.capability import RepeatedRunPower
from aidge_deploy.profiling.capability import COUNTER_SOURCES, CounterSource
from aidge_deploy.profiling.counters import CounterDomain
from aidge_deploy.registry import (
    BOARDS,
    TARGETS,
    DeployTarget,
    TransferableTarget,
    register_deploy_target,
    target_from_spec,
)
from aidge_deploy.targetcaps import counter_source, pair_caps, power_target, target_caps
from aidge_deploy.targetspec import Lane, PowerAbility, TargetKind, TargetSpec, WindowRule


@pytest.fixture
def scratch_registries(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """What a test registers in-process is forgotten after it."""
    for registry in (TARGETS, BOARDS, COUNTER_SOURCES):
        monkeypatch.setattr(registry, "_items", dict(registry._items))
    yield


@pytest.mark.parametrize(
    ("target", "backend", "expected"),
    [
        ("host", "local", dict(kind=TargetKind.HOST, runs_here=True, counters="linux-perf",
                               power=PowerAbility.REPEATED_RUN, lane=Lane.ALONE)),
        ("host", "ssh", dict(kind=TargetKind.HOST, over_ssh=True, transfers=True,
                             builds_remotely=True, counters="linux-perf-board",
                             lane=Lane.PER_BOARD)),
        ("raspberrypi", "ssh_docker", dict(kind=TargetKind.LINUX_BOARD, over_ssh=True,
                                           in_container=True, lane=Lane.PER_BOARD)),
        ("mps2-an386", "local", dict(kind=TargetKind.EMULATED_MCU, runs_here=True, flashes=True,
                                     counters="emulated-pmu", lane=Lane.PARALLEL,
                                     power=PowerAbility.FIRMWARE_WINDOW)),
        ("stm32h7a3", "local", dict(kind=TargetKind.MCU, flashes=True, counters=None,
                                    power=PowerAbility.NONE, lane=Lane.PER_BOARD)),
        ("mps2-an386", "api", dict(kind=TargetKind.EMULATED_MCU, remote=True, flashes=False,
                                   counters=None, lane=Lane.REMOTE)),
    ],
)  # fmt: skip
def test_the_built_in_pairs_declare_what_they_can_do(
    target: str, backend: str, expected: Mapping[str, Any]
) -> None:
    caps = pair_caps(target, backend)
    assert caps.backend == backend
    for name, value in expected.items():
        assert getattr(caps, name) == value, (target, backend, name)
    assert caps.this_machine is (target == "host" and backend == "local")
    assert caps.emulated is (caps.kind is TargetKind.EMULATED_MCU)


def test_a_third_party_class_has_the_caps_of_its_mixins(scratch_registries: None) -> None:
    @register_deploy_target("vendor-board", "vendorlink")
    class VendorTarget(DeployTarget, TransferableTarget, RepeatedRunPower):
        target_kind: ClassVar[TargetKind] = TargetKind.LINUX_BOARD
        hardware_model: ClassVar[str | None] = "raspberrypi"
        timing_provenance: ClassVar[Provenance] = Provenance.SILICON
        counter_provenance: ClassVar[Provenance] = Provenance.SILICON

        def prepare(self, ctx: Any) -> None: ...
        def build(self, ctx: Any) -> Any: ...
        def execute(self, ctx: Any, build: Any) -> Any: ...
        def parse_output(self, ctx: Any, execution: Any) -> Any: ...
        def transfer(self, ctx: Any, build: Any) -> None: ...
        def power_inferences_per_repeat(self, ctx: Any) -> int:
            return 1

        def run_power_window(self, ctx: Any, build: Any, plan: Any, monitor: Any) -> Any: ...

    caps = target_caps(VendorTarget)
    assert (caps.kind, caps.backend) == (TargetKind.LINUX_BOARD, "vendorlink")
    assert caps.transfers and not caps.flashes and not caps.builds_remotely
    assert caps.power is PowerAbility.REPEATED_RUN and caps.power_window is WindowRule.AT_LEAST
    assert caps.counters is None and not caps.runs_here and caps.physical
    assert caps.lane is Lane.PER_BOARD  # its kind's
    instance = VendorTarget(DeployConfig(target="vendor-board", backend="vendorlink"))
    assert target_caps(instance) == caps and power_target(instance) is instance


def test_a_plugin_board_run_on_this_machine_keeps_its_own_hardware_facts(
    scratch_registries: None,
) -> None:
    """A plug-in's board built and run here as a stand-in (the host's implementation, its
    own hardware model) is not this machine: its memories are its model's, not the OS's."""
    from aidge_deploy.boards.host.local import HostLocalTarget

    @register_deploy_target("vendor-sbc", "local")
    class VendorSbc(HostLocalTarget):
        hardware_model_module: ClassVar[str | None] = "vendor_sbc.hw"

    caps = target_caps(VendorSbc)
    assert caps.kind is TargetKind.HOST and caps.runs_here and caps.own_hardware_model
    assert not caps.this_machine
    assert target_caps(HostLocalTarget).this_machine


class _CycleCounts(CounterSource[DeployTarget]):
    """A lab's counter source for probe boards: what it counts depends on its target."""

    counter_domain: ClassVar[CounterDomain] = CounterDomain.ARMV8M_PMU
    max_counters_per_pass: ClassVar[int] = 2

    def available_counters(self) -> Mapping[str, str | None]:
        return {"cycles": None, "target": f"counted for {self.config.target}"}

    def run_counter_pass(self, ctx: Any, build: Any, counter_pass: Any) -> Any:
        raise NotImplementedError


def test_a_record_composes_its_counter_source_beside_its_target(
    scratch_registries: None,
) -> None:
    COUNTER_SOURCES.register("lab-cycles", COUNTER_SOURCES.adopt("lab-cycles", _CycleCounts))
    spec = TargetSpec("lab-nucleo", TargetKind.MCU, ("local",), hardware_model="stm32h7a3",
                      counters="lab-cycles")  # fmt: skip
    BOARDS.register(spec.name, spec)
    cls = target_from_spec(spec, "local")
    assert not issubclass(cls, _CycleCounts)  # composed, not inherited
    caps = target_caps(cls)
    assert caps.counters == "lab-cycles"
    target = cls(DeployConfig(target="lab-nucleo"))
    source = counter_source(target)
    assert isinstance(source, _CycleCounts) and source.target is target
    assert source.available_counters()["target"] == "counted for lab-nucleo"  # the target's state
    assert source.max_counters_per_pass == 2


def test_no_target_inherits_its_counter_source() -> None:
    """Every registered target counts with a source built with it, named by its class or
    record: none is a counter source itself."""
    counting = 0
    for cls in TARGETS.all().values():
        assert not issubclass(cls, CounterSource), cls.__qualname__
        caps = target_caps(cls)
        assert caps.counters in (cls.counts_with, getattr(cls.spec, "counters", None))
        if caps.counters is not None:
            counting += 1
            source = COUNTER_SOURCES.find(caps.counters)
            assert source is not None and source.counter_source == caps.counters
    assert counting >= 3  # host, the SSH boards, the emulated boards


def test_a_plugin_target_names_the_source_it_counts_with(scratch_registries: None) -> None:
    """A third party's class registered with ``register_deploy_target`` counts with the
    source it names (``counts_with``), built with it for each run."""
    COUNTER_SOURCES.register("lab-cycles", COUNTER_SOURCES.adopt("lab-cycles", _CycleCounts))

    @register_deploy_target("stm32h743", "lab-probe")
    class LabProbe(DeployTarget):
        timing_provenance: ClassVar[Provenance] = Provenance.SILICON
        counter_provenance: ClassVar[Provenance] = Provenance.SILICON
        counts_with: ClassVar[str | None] = "lab-cycles"

        def prepare(self, ctx: Any) -> None: ...
        def build(self, ctx: Any) -> Any: ...
        def execute(self, ctx: Any, build: Any) -> Any: ...
        def parse_output(self, ctx: Any, execution: Any) -> Any: ...

    assert target_caps(LabProbe).counters == "lab-cycles"
    target = LabProbe(DeployConfig(target="stm32h743", backend="lab-probe"))
    source = counter_source(target)
    assert isinstance(source, _CycleCounts) and source.target is target
    assert source.available_counters()["target"] == "counted for stm32h743"


def test_a_record_naming_a_source_its_kind_already_counts_with_is_refused(
    scratch_registries: None,
) -> None:
    spec = TargetSpec("lab-an386b", TargetKind.EMULATED_MCU, ("local",),
                      hardware_model="mps2-an386", counters="linux-perf")  # fmt: skip
    BOARDS.register(spec.name, spec)
    with pytest.raises(ConfigError, match="counts with 'emulated-pmu'"):
        target_caps(target_from_spec(spec, "local"))


def test_a_record_withholding_power_is_refused_a_power_run(scratch_registries: None) -> None:
    spec = TargetSpec("lab-an386c", TargetKind.EMULATED_MCU, ("local",),
                      hardware_model="mps2-an386", power=PowerAbility.NONE)  # fmt: skip
    BOARDS.register(spec.name, spec)
    caps = target_caps(target_from_spec(spec, "local"))
    assert caps.power is PowerAbility.NONE and not caps.power_variant
    assert pair_caps("mps2-an386", "local").power is PowerAbility.FIRMWARE_WINDOW
    config = DeployConfig(target="lab-an386c", power="emulated")
    with pytest.raises(ConfigError, match="cannot run a power window"):
        check_deploy_config(config, "lab-an386c")
