"""Rules on the source itself (issue 30), checked on its syntax tree so that a new violation
fails here with its file and line: results are read through typed accessors, and the
untyped ``DeployResult.metrics`` dict only in its compatibility view."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "aidge_deploy"

#: the module that is the compatibility view of ``DeployResult.metrics``: the result
#: itself, with its typed accessors
METRICS_VIEW = {"results.py"}


def _sources() -> list[tuple[str, ast.Module]]:
    return [
        (path.relative_to(SRC).as_posix(), ast.parse(path.read_text(), str(path)))
        for path in sorted(SRC.rglob("*.py"))
    ]


def metrics_subscripts(tree: ast.Module) -> list[int]:
    """Lines where ``<something>.metrics[...]`` is read (not ``scan.metrics[0]``, a list
    index on a parser's scan: only string keys are the result's dict)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "metrics"
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    ]


def test_no_metrics_dict_reads_outside_the_compatibility_view() -> None:
    found = [
        f"{name}:{line}"
        for name, tree in _sources()
        if name not in METRICS_VIEW
        for line in metrics_subscripts(tree)
    ]
    assert found == [], f"read DeployResult's typed accessors instead: {found}"


def test_the_rule_sees_a_metrics_read() -> None:
    tree = ast.parse('prov = result.metrics["provenance"]\nfirst = scan.metrics[0]\n')
    assert metrics_subscripts(tree) == [1]


#: the capability mixins of a deploy target: asked through its caps (``targetcaps``)
CAPABILITY_MIXINS = {
    "CounterSource",
    "PowerCapableTarget",
    "RepeatedRunPower",
    "TransferableTarget",
    "FlashableTarget",
    "RemoteBuildTarget",
    "RemoteBackend",
}
#: the board kinds' and backends' names: compared only where they are declared
BOARD_WORDS = {"host", "local", "ssh", "ssh_docker", "api", "linux-board", "emulated-mcu", "mcu"}
#: a target's capability attributes: read from its caps, never off its class by ``getattr``
CAPABILITY_ATTRIBUTES = {"emulated", "reach", "over_ssh", "runs_here", "remote"}
#: the registry modules: where a target's capabilities are derived from its classes and names
REGISTRY_MODULES = {"registry.py", "targetcaps.py", "targetspec.py", "boardspecs.py"}


def _names(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {n for e in node.elts for n in _names(e)}
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    return set()


def _strings(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {s for e in node.elts for s in _strings(e)}
    return set()


def capability_tests(tree: ast.Module) -> list[int]:
    """Lines that test a target's class against a capability mixin (``isinstance``,
    ``issubclass``) or compare a value with a board kind's or backend's name (``==``,
    ``!=``, ``in``, ``not in``, ``is``) or reads a capability off it by ``getattr``."""
    found = []
    for node in ast.walk(tree):
        mixin = (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
            and len(node.args) == 2
            and bool(_names(node.args[1]) & CAPABILITY_MIXINS)
        )
        name = isinstance(node, ast.Compare) and any(
            _strings(side) & BOARD_WORDS for side in (node.left, *node.comparators)
        )
        attribute = (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and bool(_strings(node.args[1]) & CAPABILITY_ATTRIBUTES)
        )
        if mixin or name or attribute:
            found.append(node.lineno)
    return sorted(set(found))


def test_no_capability_tested_by_class_or_name_outside_the_registry() -> None:
    found = [
        f"{name}:{line}"
        for name, tree in _sources()
        if name not in REGISTRY_MODULES
        for line in capability_tests(tree)
    ]
    assert found == [], f"ask the target's caps (aidge_deploy.targetcaps) instead: {found}"


def test_the_rule_sees_a_capability_test() -> None:
    tree = ast.parse(
        "a = isinstance(target, PowerCapableTarget)\n"
        "b = issubclass(cls, (DeployTarget, registry.FlashableTarget))\n"
        'c = config.backend_kind in ("ssh", "ssh_docker")\n'
        'd = target == "host"\n'
        'e = "api" != backend\n'
        "f = isinstance(target, DeployTarget)\n"
        'g = kind == "energy"\n'
        "h = caps.over_ssh\n"
        'i = getattr(target_cls, "emulated", False)\n'
        'j = getattr(getattr(target, "reach", None), "over_ssh", False)\n'
        'k = getattr(target_cls, "board_name", None)\n'
    )
    assert capability_tests(tree) == [1, 2, 3, 4, 5, 9, 10]


#: where the guide's flat option fields are read: the config that carries them and the
#: records that type them; the lab file's own records spell their keys the same way
OPTIONS_VIEW = {"config.py", "backendoptions.py", "lab.py", "labscan.py"}


#: how the code names a ``DeployConfig`` (a variable, or an object's ``.config``)
CONFIG_NAMES = {"config", "cfg", "c", "deploy_config"}


def _is_config(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in CONFIG_NAMES
    return isinstance(node, ast.Attribute) and node.attr in CONFIG_NAMES


def guide_option_reads(tree: ast.Module) -> list[int]:
    """Lines that read one of the guide's flat backend options off a config
    (``config.ssh_host``) instead of the backend's typed record (``config.ssh.host``);
    writes (the published exporters set them after construction) and keyword arguments
    are the guide's spelling."""
    from aidge_deploy.backendoptions import guide_field_names

    names = guide_field_names()
    return sorted(
        {
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Load)
            and node.attr in names
            and _is_config(node.value)
        }
    )


def test_backends_read_their_options_as_typed_records() -> None:
    found = [
        f"{name}:{line}"
        for name, tree in _sources()
        if name not in OPTIONS_VIEW
        for line in guide_option_reads(tree)
    ]
    assert found == [], f"read the backend's record (config.ssh, config.farm...): {found}"


def test_the_rule_sees_a_flat_option_read() -> None:
    tree = ast.parse(
        "host = config.ssh_host\n"
        "config.api_url = url\n"
        "host = config.ssh.host\n"
        "DeployConfig(docker_image='img')\n"
        "image = self.config.docker_image\n"
        "tofu = config.ssh.cross_compile\n"
        "part = probe.pyocd_target\n"
    )
    assert guide_option_reads(tree) == [1, 5]
