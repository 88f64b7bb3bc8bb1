"""A build carries the programs that made it; the run's metadata names the real compiler.

A K230 cross build is ``riscv64-linux-gnu-g++`` (it was recorded as the Raspberry Pi's
``aarch64-linux-gnu-g++`` whatever the board); a CMake build names the compiler CMake's cache
says it used; a build on a board says where it ran instead of a version probed here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aidge_deploy.artifact import load_export_artifact
from aidge_deploy.boards.sbc.targets import K230Ssh
from aidge_deploy.buildsys import _build_toolchain, build_export, plan_build
from aidge_deploy.cachedir import default_cache_root
from aidge_deploy.config import DeployConfig
from aidge_deploy.report.metadata import toolchain_versions
from aidge_deploy.results import Toolchain


def test_a_k230_cross_build_is_recorded_as_built_by_the_riscv64_compiler(
    export_factory: Any, tmp_path: Path
) -> None:
    config = DeployConfig(target="k230", backend="ssh", ssh_host="k230.lan", cross_compile=True)
    toolchain = K230Ssh(config).toolchain
    artifact = load_export_artifact(export_factory("benchmark"))
    plan = plan_build(
        artifact, tmp_path / "build", toolchain_file=tmp_path / "tc.cmake", compiler=toolchain.cxx
    )
    recorded = _build_toolchain(plan, plan.build_dir)
    assert recorded == Toolchain(("cmake", "riscv64-linux-gnu-g++"))
    assert "riscv64-linux-gnu-g++" in toolchain_versions(recorded, emulated=False)
    assert "aarch64-linux-gnu-g++" not in toolchain_versions(recorded, emulated=False)


def test_a_host_build_names_the_compiler_cmake_used_even_when_cached(
    export_factory: Any, tmp_path: Path
) -> None:
    artifact = load_export_artifact(export_factory("benchmark"))
    plan = plan_build(artifact, tmp_path / "build")
    built = build_export(artifact, plan, tmp_path / "build.log")
    cache = (tmp_path / "build" / "CMakeCache.txt").read_text()
    used = next(
        line.split("=", 1)[1]
        for line in cache.splitlines()
        if line.startswith("CMAKE_CXX_COMPILER:")
    )
    assert built.toolchain == Toolchain(("cmake", Path(used).name))
    again = build_export(artifact, plan, tmp_path / "build-again.log")
    assert again.status == "cached" and again.toolchain == built.toolchain
    versions = toolchain_versions(again.toolchain, emulated=False)
    assert (versions["cmake"] or "").startswith("cmake version")


def test_a_build_on_the_board_says_where_it_ran() -> None:
    versions = toolchain_versions(Toolchain(("cmake", "c++"), elsewhere="on pi@rpi"), emulated=True)
    assert versions == {
        "cmake": "ran on pi@rpi (version not recorded)",
        "c++": "ran on pi@rpi (version not recorded)",
        "qemu-system-arm": versions["qemu-system-arm"],
    }


def test_keep_build_dir_keeps_a_failed_local_build_and_says_where(
    export_factory: Any, tmp_path: Path
) -> None:
    """On this machine builds go to a content-keyed cache entry, built in a private folder:
    ``keep_build_dir`` keeps that folder when the build fails (for a look at CMake's files),
    and the error names it; without it the failed folder is removed."""
    import shutil

    import pytest

    import aidge_deploy
    from aidge_deploy.errors import BuildError

    broken = tmp_path / "broken_export"
    shutil.copytree(load_export_artifact(export_factory("benchmark")).path, broken)
    main = next(broken.rglob("main.cpp"))
    main.write_text(main.read_text() + "\nthis is not C++;\n")
    for keep in (False, True):
        with pytest.raises(BuildError) as info:
            aidge_deploy.deploy(
                broken, DeployConfig(target="host", keep_build_dir=keep), work_dir=tmp_path / "w"
            )
        hint = info.value.hint or ""
        if keep:
            kept = Path(hint.rsplit("kept in ", 1)[1].rstrip("."))
            assert (kept / "CMakeCache.txt").is_file(), hint
        else:
            assert "kept in" not in hint
            builds = default_cache_root() / "builds"
            assert not list(builds.glob(".tmp-broken_export-*")), "the failed build is removed"
