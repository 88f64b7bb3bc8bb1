"""One registry shape, fed by entry points: what is built in is declared like a plug-in.

Every thing a module of the package registers has an entry point of its kind in
``pyproject.toml`` (else a plug-in-style lookup could not find it without a hard-coded module
list), every declared entry point loads, the installed metadata is the one ``pyproject.toml``
declares (an editable install older than a new entry point), and a lookup loads only the
module of the name it asks for.
"""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import aidge_deploy
from aidge_deploy.errors import ConfigError
from aidge_deploy.extensions import DISTRIBUTION, GROUPS, KINDS, Registry, registries

ROOT = Path(__file__).resolve().parents[1]


def _registries() -> dict[str, Registry[object]]:
    groups = {group: kind for kind, group in GROUPS.items()}
    found = {groups[registry.group]: registry for registry in registries()}
    assert set(found) == set(GROUPS), "every extension point has its registry"
    return found


def _import_every_module() -> None:
    for info in pkgutil.walk_packages(aidge_deploy.__path__, "aidge_deploy."):
        importlib.import_module(info.name)


def test_everything_registered_in_the_package_is_declared_as_an_entry_point() -> None:
    _import_every_module()
    for kind, registry in _registries().items():
        assert registry.group == GROUPS[kind]
        own = registry.declared(everywhere=False)
        undeclared = sorted(set(registry.registered()) - set(own))
        assert undeclared == [], f"declare them in pyproject.toml under {registry.group}"


def test_every_declared_entry_point_loads_as_its_name() -> None:
    for kind, registry in _registries().items():
        items = registry.all()
        assert registry.failures == {}, kind
        assert set(registry.declared(everywhere=False)) <= set(items), kind


def test_the_installed_entry_points_are_those_of_pyproject() -> None:
    """An editable install keeps the entry points of when it was installed: re-run
    scripts/setup.sh after pyproject.toml declares new ones."""
    import importlib.metadata

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    installed = importlib.metadata.distribution(DISTRIBUTION).entry_points
    for group in GROUPS.values():
        want = declared.get(group, {})
        have = {ep.name: ep.value for ep in installed if ep.group == group}
        assert have == want, f"{group}: re-run scripts/setup.sh (pip install -e .)"


def test_each_emulated_board_descriptor_has_its_target() -> None:
    from aidge_deploy.boards.baremetal.qemu.targets import emulated_targets
    from aidge_deploy.registry import get_deploy_target_class
    from aidge_qemu_descriptors import list_boards

    TARGETS = emulated_targets()
    assert set(TARGETS) == {b.name for b in list_boards()}
    for name, cls in TARGETS.items():
        assert get_deploy_target_class(name, "local") is cls


@pytest.mark.parametrize(
    ("target", "imported", "not_imported"),
    [
        ("host", "aidge_deploy.boards.host.local", ("aidge_deploy.boards.sbc", "asyncssh")),
        (
            "mps2-an386",
            "aidge_deploy.boards.baremetal.qemu.targets",
            ("aidge_deploy.boards.sbc", "asyncssh", "aidge_qemu_boards", "aidge_core"),
        ),
    ],
)
def test_a_lookup_imports_only_the_module_it_names(
    target: str, imported: str, not_imported: tuple[str, ...]
) -> None:
    probe = (
        "import sys\n"
        "from aidge_deploy import extensions\n"
        "from aidge_deploy.protocols.registry import get_protocol\n"
        "from aidge_deploy.registry import get_deploy_target_class, remote_backend\n"
        f"get_deploy_target_class({target!r}, 'local')\n"
        "assert remote_backend('local') is None\n"
        "get_protocol('aidge-stdout-benchmark/v1')\n"
        "scans = extensions._all_entry_points.cache_info().currsize\n"
        "print(' '.join(sorted(sys.modules)), f'SCANS={scans}')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=300, check=True)  # fmt: skip
    modules = set(done.stdout.split())
    # our own entry points answer a built-in lookup: no scan of every installed distribution
    assert "SCANS=0" in modules
    assert imported in modules
    loaded = [m for m in modules if m.startswith(not_imported)]
    assert loaded == [], f"a {target} lookup imported {loaded}"


def test_a_name_registered_twice_by_two_classes_is_refused() -> None:
    registry: Registry[type] = Registry("flashers", None)

    class A:
        pass

    class B:
        pass

    registry.register("w", A)
    registry.register("w", A)  # the same class again (a module imported twice): fine
    with pytest.raises(ConfigError, match="registered twice"):
        registry.register("w", B)


def test_an_entry_point_named_after_another_pair_is_refused() -> None:
    from aidge_deploy.boards.host.local import HostLocalTarget
    from aidge_deploy.registry import TARGETS

    with pytest.raises(ConfigError, match="registered as host/local"):
        TARGETS.adopt("my-board/local", HostLocalTarget)
    with pytest.raises(ConfigError, match="TARGET/BACKEND"):
        TARGETS.adopt("my-board", HostLocalTarget)
    with pytest.raises(ConfigError, match="not a DeployTarget"):
        TARGETS.adopt("my-board/local", object)


def test_each_kind_is_named_once_and_adopted_by_one_rule() -> None:
    """One table names every extension point (its group, contract and registry), and every
    registry adopts by the same rule: a class of the contract, carrying its entry-point
    name; a class that says another name is refused."""
    from aidge_deploy.flash.flashers import PyocdFlasher
    from aidge_deploy.flash.registry import FLASHERS
    from aidge_deploy.power.monitors import HwmonMonitorKind
    from aidge_deploy.power.registry import POWER_MONITORS
    from aidge_deploy.protocols.registry import PROTOCOLS
    from aidge_deploy.protocols.stdout import StdoutV1

    assert [r.group for r in registries()] == [k.group for k in KINDS.values()]
    for kind in KINDS.values():
        module, _, name = kind.contract.partition(":")
        assert isinstance(getattr(importlib.import_module(module), name), type), kind
    for registry, name, cls, other in (  # by entry-point name: a class is named on adoption
        (FLASHERS, "pyocd", PyocdFlasher, "st-flash"),
        (POWER_MONITORS, "hwmon", HwmonMonitorKind, "ina226"),
        (PROTOCOLS, "aidge-stdout/v1", StdoutV1, "aidge-stdout/v9"),
    ):
        own = registry.find(name)
        assert own is cls
        assert cls.name == name
        with pytest.raises(ConfigError, match="entry point's name is the registered name"):
            registry.adopt(other, cls)
        with pytest.raises(ConfigError, match="not a"):
            registry.adopt(other, object() if registry is PROTOCOLS else object)
