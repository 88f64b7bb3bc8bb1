"""A vendor's plug-in distribution, built and installed here, extends aidge-deploy by being
installed: a target (with its hardware model and C++ export), an output protocol and a power
monitor, declared as entry points only (no list in aidge-deploy names them).

The wheel is built in the test (a zip with its ``.dist-info``: no build backend, no network)
and installed by pip into a folder of its own, put on ``PYTHONPATH`` of the commands run:
``importlib.metadata`` finds it there as it finds any installed distribution. The commands
list the three things (``targets``, ``doctor``), export a model for the new target through
its hardware model and deploy it, and deploy an export whose manifest names its protocol.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pluginwheel import cli, flat, installed_env

NAME, VERSION = "vendorboard", "1.0"

SOURCES = {
    "vendorboard/__init__.py": '"""A vendor board for aidge-deploy, as its plug-in would ship."""\n',
    # the hardware model and its C++ export, registered with Aidge when imported
    "vendorboard/hw.py": '''
from aidge_core.export_utils import register_target_export
from aidge_core.hw_model import register_target
from aidge_core.hw_model.components import Memory
from aidge_core.hw_model.processing_elements import CPU
from aidge_core.hw_model.targets.sbc_targets import SBC
from aidge_export_cpp.targets.common import CppTargetExport


@register_target("vendorboard")
class VendorBoard(SBC):
    """The vendor's Linux board: one CPU, 512 MiB."""

    def __init__(self, xnn_pack: bool = False) -> None:
        super().__init__("vendorboard", CPU(xnn_pack=xnn_pack), Memory(capacity=512 << 20, priority=0))


VENDOR_EXPORT = register_target_export(CppTargetExport("vendorboard"))
''',
    # the deploy target: reached on this machine, like the host (no decorator: the entry
    # point registers it)
    "vendorboard/target.py": '''
from aidge_deploy.boards.host.local import HostLocalTarget


class VendorBoardTarget(HostLocalTarget):
    """The vendor board, built and run on this machine."""

    hardware_model_module = "vendorboard.hw"
    description = "vendor board: native build + run (plug-in)"
''',
    "vendorboard/protocol.py": '''
import dataclasses

from aidge_deploy.protocols.stdout import StdoutBenchmarkV1


class VendorStdout(StdoutBenchmarkV1):
    """The vendor's benchmark lines (Aidge's stdout benchmark, under the vendor's name)."""

    name = "vendor-stdout/v1"

    def parse(self, text, manifest):
        result = super().parse(text, manifest)
        return dataclasses.replace(
            result, protocol=self.name, notices=(*result.notices, "parsed by vendorboard")
        )
''',
    "vendorboard/meter.py": '''
from aidge_deploy.power.monitors import HwmonMonitorKind


class VendorMeterKind(HwmonMonitorKind):
    """The vendor board's INA226 supply rail, read through hwmon."""

    name = "vendormeter"
    reads = "the vendor board's INA226 supply rail (hwmon)"
''',
}
ENTRY_POINTS = """\
[aidge_deploy.targets]
vendorboard/local = vendorboard.target:VendorBoardTarget

[aidge_deploy.protocols]
vendor-stdout/v1 = vendorboard.protocol:VendorStdout

[aidge_deploy.power_monitors]
vendormeter = vendorboard.meter:VendorMeterKind
"""


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a command that sees the installed plug-in."""
    root = tmp_path_factory.mktemp("plugin")
    return installed_env(root, NAME, VERSION, SOURCES, ENTRY_POINTS)


def test_the_plugins_things_are_listed_by_targets(plugin_env: dict[str, str]) -> None:
    done = cli(plugin_env, "targets")
    assert done.returncode == 0, done.stderr
    out = flat(done.stdout)
    # its target, with the facts of its own hardware model
    assert "vendorboard api, local linux: CPU" in out and "mem 512 MiB" in out
    assert "vendor board: native build + run (plug-in)" in out
    assert "protocol vendor-stdout/v1 The vendor's benchmark lines" in out
    assert "power vendormeter[:NAME] host / silicon (SSH board): the vendor board's INA226" in out
    assert "failed to load" not in out


def test_the_plugins_things_are_checked_by_doctor(plugin_env: dict[str, str]) -> None:
    done = cli(plugin_env, "doctor")
    assert done.returncode in (0, 1), done.stderr
    out = flat(done.stdout)
    assert "✓ vendorboard /local ready" in out  # cmake, c++ and make are here
    assert "vendormeter[:NAME]" in out and "hwmon" in out  # its sensors, found or not
    assert "vendor-stdout/v1" in out
    assert "Plug-ins that failed to load" not in out


@pytest.mark.slow
def test_a_deploy_on_the_plugins_target_runs_with_its_protocol(
    plugin_env: dict[str, str], tiny_cnn: Path, tmp_path: Path
) -> None:
    """``profile`` exports for the new target through the plug-in's hardware model (found
    through its target's entry point) and deploys it; then an export whose manifest names
    the plug-in's protocol is parsed by it."""
    export = tmp_path / "export"
    done = cli(
        plugin_env, "profile", str(tiny_cnn), "--target", "vendorboard", "--iterations", "3",
        "--work-dir", str(export), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["target"] == "vendorboard" and result["backend"] == "local"
    assert result["latency"]["n"] == 3 and result["protocol"] == "aidge-stdout-benchmark/v1"
    manifest_path = export / ".aidge-export.json"
    manifest = json.loads(manifest_path.read_text())
    assert manifest["target"] == "vendorboard"
    manifest["protocol"] = "vendor-stdout/v1"  # as the vendor's exporter would declare it
    manifest_path.write_text(json.dumps(manifest))
    done = cli(plugin_env, "run", str(export), "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["protocol"] == "vendor-stdout/v1" and result["latency"]["n"] == 3


def test_without_the_plugin_its_target_is_unknown(tiny_cnn: Path) -> None:
    """The same command without the distribution installed: nothing of it is found."""
    env = {**os.environ, "COLUMNS": "200"}
    done = cli(env, "profile", str(tiny_cnn), "--target", "vendorboard")
    assert done.returncode == 2 and "Unknown target 'vendorboard'" in flat(done.stderr)
