"""In-process memos of file facts (``filememo``) and the export hash kept with one.

A memo must never answer for a file that changed: every test below changes a file in a way a
cheaper signature would miss (same size, mtime put back), or adds, removes or replaces an
entry, and checks that the answer is derived again. The files are first left to *settle*
(a memo keeps nothing read from a file changed within its times' resolution), else the memo
would not be exercised at all; each test checks that it was.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from aidge_deploy import artifact, buildsys, filememo
from aidge_deploy.boards.baremetal.qemu import pmu
from aidge_deploy.boards.baremetal.qemu.pmu import PmuSymbols
from aidge_deploy.connections import toolcache
from aidge_deploy.connections.toolcache import compile_cached, find_c_compiler
from aidge_deploy.filememo import FileMemo, Reads, settled, signature
from aidge_deploy.profiling import model_analysis
from aidge_deploy.profiling.model_analysis import analyze_export
from envparts import needs


def _settle(*paths: Path) -> None:
    """Wait until every path's last change is old enough for a memo to keep it."""
    for path in paths:
        while not settled(signature(str(path)), time.time_ns()):
            time.sleep(0.02)


def _rewrite_keeping_size_and_mtime(path: Path, text: str) -> None:
    before = path.stat()
    assert len(text.encode()) == before.st_size
    path.write_text(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def _kept(memo: FileMemo[str, str], key: str, *paths: Path) -> None:
    """Store ``key`` -> "old" derived from ``paths``, and check the memo serves it."""
    since = time.time_ns()
    memo.put(key, "old", [(str(p), signature(str(p))) for p in paths], since)
    assert memo.get(key) == "old"


@pytest.fixture
def header(tmp_path: Path) -> Path:
    """A settled file."""
    f = tmp_path / "a.h"
    f.write_text("#define A 1\n")
    _settle(f)
    return f


def test_an_unchanged_file_is_answered_from_memory(header: Path) -> None:
    memo: FileMemo[str, str] = FileMemo()
    _kept(memo, "k", header)
    assert memo.get("k") == "old" and memo.get("other") is None


def test_answer_derives_once_and_keeps_nothing_after_an_error_or_forget(header: Path) -> None:
    memo: FileMemo[str, str] = FileMemo()
    derived: list[str] = []

    def derive(reads: Reads) -> str:
        reads.sign(header)
        derived.append(header.read_text())
        return derived[-1]

    assert memo.answer("k", derive) == memo.answer("k", derive) == "#define A 1\n"
    assert len(derived) == 1
    _rewrite_keeping_size_and_mtime(header, "#define A 2\n")
    assert memo.answer("k", derive) == "#define A 2\n" and len(derived) == 2

    def failing(reads: Reads) -> str:
        reads.sign(header)
        raise OSError("unreadable")

    with pytest.raises(OSError):
        memo.answer("e", failing)
    assert memo.get("e") is None

    def forgetting(reads: Reads) -> str:
        reads.sign(header)
        reads.forget()
        return "not only files"

    memo.answer("f", forgetting)
    assert memo.get("f") is None


def test_a_same_size_rewrite_with_its_mtime_put_back_is_seen(header: Path) -> None:
    memo: FileMemo[str, str] = FileMemo()
    _kept(memo, "k", header)
    _rewrite_keeping_size_and_mtime(header, "#define A 2\n")
    assert memo.get("k") is None
    assert memo.get("k") is None  # and forgotten


def test_a_file_replaced_by_rename_is_seen(tmp_path: Path) -> None:
    f = tmp_path / "a.h"
    f.write_text("one\n")
    _settle(f)
    memo: FileMemo[str, str] = FileMemo()
    _kept(memo, "k", f)
    other = tmp_path / "b.tmp"
    other.write_text("two\n")
    os.utime(other, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns))
    other.replace(f)
    assert memo.get("k") is None


def test_an_entry_added_to_or_removed_from_a_folder_is_seen(tmp_path: Path) -> None:
    folder = tmp_path / "layers"
    folder.mkdir()
    (folder / "a.h").write_text("a\n")
    _settle(folder)
    memo: FileMemo[str, str] = FileMemo()
    _kept(memo, "k", folder)
    (folder / "b.h").write_text("b\n")
    assert memo.get("k") is None
    _settle(folder)
    _kept(memo, "k", folder)
    (folder / "b.h").unlink()
    assert memo.get("k") is None


def test_a_missing_file_that_appears_or_a_file_removed_is_seen(tmp_path: Path) -> None:
    missing, present = tmp_path / "later.h", tmp_path / "now.h"
    present.write_text("x\n")
    _settle(present)
    memo: FileMemo[str, str] = FileMemo()
    _kept(memo, "k", missing, present)
    missing.write_text("y\n")
    assert memo.get("k") is None
    _settle(missing)
    _kept(memo, "k", missing, present)
    present.unlink()
    assert memo.get("k") is None


def test_a_file_changed_a_moment_ago_is_not_kept(tmp_path: Path) -> None:
    """Within its times' resolution a second change could keep the same times: not kept."""
    f = tmp_path / "a.h"
    f.write_text("x\n")
    memo: FileMemo[str, str] = FileMemo()
    memo.put("k", "v", [(str(f), signature(str(f)))], time.time_ns())
    assert memo.get("k") is None


def test_settled_needs_longer_on_a_file_system_of_whole_seconds() -> None:
    def sig(ctime_ns: int) -> filememo.Signature:
        return (1, 2, 3, ctime_ns, ctime_ns, 0o100644)

    fine, coarse = 1_700_000_000_123_456_789, 1_700_000_000_000_000_000
    assert settled(sig(fine), fine + filememo.SETTLED_NS + 1)
    assert not settled(sig(fine), fine + filememo.SETTLED_NS)
    assert not settled(sig(coarse), coarse + filememo.SETTLED_NS + 1)
    assert settled(sig(coarse), coarse + filememo.SETTLED_COARSE_NS + 1)
    assert settled(None, 0)  # a missing path: its appearance is the change


def test_the_memo_keeps_the_last_answers_only(tmp_path: Path) -> None:
    f = tmp_path / "a"
    f.write_text("x")
    _settle(f)
    memo: FileMemo[str, str] = FileMemo(kept=2)
    for key in ("k1", "k2", "k3"):
        _kept(memo, key, f)
    assert memo.get("k1") is None and memo.get("k2") == memo.get("k3") == "old"


# -- the export hash ------------------------------------------------------------------------


@pytest.fixture
def export_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AIDGE_DEPLOY_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "export"
    (root / "dnn" / "include" / "layers").mkdir(parents=True)
    (root / "dnn" / "include" / "layers" / "conv.h").write_text("#define CONV_SIZE 8\n")
    (root / "main.cpp").write_text("int main() { return 0; }\n")
    (root / ".aidge-export.json").write_text("{}\n")
    (root / "build").mkdir()
    (root / "build" / "run.o").write_text("object")
    _settle(*(p for p in [root, *root.rglob("*")]))
    return root


def _fresh_hash(root: Path) -> str:
    """The hash as a new process computes it: no memo of either kind."""
    artifact._HASHES.clear()
    for memo in (Path(os.environ["AIDGE_DEPLOY_CACHE_DIR"]) / "hashes").glob("*.json"):
        memo.unlink()
    return artifact.export_hash(SimpleNamespace(path=root))  # type: ignore[arg-type]


def _walks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    walked: list[str] = []
    walk = artifact._source_entries

    def counting(top: str, folders: list[tuple[str, filememo.Signature]] | None = None):  # type: ignore[no-untyped-def]
        walked.append(top)
        return walk(top, folders)

    monkeypatch.setattr(artifact, "_source_entries", counting)
    return walked


def _hash(root: Path) -> str:
    return artifact.export_hash(SimpleNamespace(path=root))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "change",
    [
        "rewrite_same_size_mtime_back",
        "add_in_subfolder",
        "remove",
        "add_top_level_folder",
        "replace_by_rename",
    ],
)
def test_the_export_hash_is_kept_in_memory_and_sees_every_change(
    export_dir: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    walked = _walks(monkeypatch)
    artifact._HASHES.clear()
    first = _hash(export_dir)
    assert _hash(export_dir) == first
    assert len(walked) == 1, "the second hash of an unchanged export walked it again"
    header = export_dir / "dnn" / "include" / "layers" / "conv.h"
    if change == "rewrite_same_size_mtime_back":
        _rewrite_keeping_size_and_mtime(header, "#define CONV_SIZE 9\n")
    elif change == "add_in_subfolder":
        (header.parent / "fc.h").write_text("#define FC_SIZE 4\n")
    elif change == "remove":
        header.unlink()
    elif change == "add_top_level_folder":
        (export_dir / "data").mkdir()
        (export_dir / "data" / "input.h").write_text("1\n")
    else:
        replacement = export_dir / "main.cpp.new"
        replacement.write_text("int main() { return 1; }\n")
        replacement.replace(export_dir / "main.cpp")
    changed = _hash(export_dir)
    assert changed != first
    assert changed == _fresh_hash(export_dir)


def test_build_outputs_do_not_change_the_export_hash(
    export_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _fresh_hash(export_dir)
    (export_dir / "build" / "more.o").write_text("object")
    (export_dir / "export_log.log").write_text("make output")
    assert _hash(export_dir) == first


# -- the tool cache -------------------------------------------------------------------------


@needs(shutil.which("cc") is not None or shutil.which("gcc") is not None, "no C compiler")
def test_a_cached_tool_is_checked_by_stat_and_rebuilt_when_deleted_or_its_source_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "src" / "tool.c"
    source.parent.mkdir()
    source.write_text("int main(void) { return 3; }\n")
    cc = find_c_compiler(purpose="a test tool")
    compiles: list[list[str]] = []
    real = toolcache.run_captured

    def counting(cmd: list[str], **kw: object):  # type: ignore[no-untyped-def]
        compiles.append(cmd)
        return real(cmd, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(toolcache, "run_captured", counting)
    reads: list[Path] = []
    read_bytes = Path.read_bytes

    def counting_read(self: Path) -> bytes:
        reads.append(self)
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", counting_read)

    def build() -> Path:
        return compile_cached("tool", [source], cc, ["-O0"], cache_root=tmp_path / "cache")

    first = build()
    assert len(compiles) == 1 and subprocess.run([first]).returncode == 3
    _settle(source, first)
    reads.clear()
    assert build() == first and reads == [source]  # hashed once more, then kept
    assert build() == first and reads == [source] and len(compiles) == 1  # kept: no read
    first.unlink()  # a stale answer must not outlive its output
    assert build() == first and first.is_file() and len(compiles) == 2
    _settle(first)
    build()
    source.write_text("int main(void) { return 4; }\n")  # a new source version
    second = build()
    assert second != first and len(compiles) == 3 and subprocess.run([second]).returncode == 4


# -- the layer analysis ---------------------------------------------------------------------


def _layer(folder: Path, name: str, weights: int) -> Path:
    header = folder / f"{name}.h"
    prefix = name.upper()
    header.write_text(
        f"#define {prefix}_OUTPUT_0_NB_OUTPUTS 4\n#define {prefix}_OUTPUT_0_OUT_HEIGHT 2\n"
        f"#define {prefix}_OUTPUT_0_OUT_WIDTH 2\n#define {prefix}_WEIGHTS_SIZE {weights}\n"
    )
    return header


def test_the_layer_analysis_is_kept_in_memory_and_sees_every_change(
    export_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = export_dir / "dnn" / "include" / "layers"
    conv = _layer(folder, "conv", 36)
    _settle(folder, conv)
    export = SimpleNamespace(path=export_dir)
    parsed: list[Path] = []
    defines = model_analysis._defines

    def counting(path: Path) -> dict[str, int]:
        parsed.append(path)
        return defines(path)

    monkeypatch.setattr(model_analysis, "_defines", counting)
    model_analysis._ANALYSES.clear()
    first = analyze_export(export)  # type: ignore[arg-type]
    assert [(a.name, a.macs) for a in first] == [("conv", 36 * 4)]
    parsed.clear()
    assert analyze_export(export) == first and parsed == []  # type: ignore[arg-type]
    _rewrite_keeping_size_and_mtime(conv, conv.read_text().replace("SIZE 36", "SIZE 37"))
    assert [(a.name, a.macs) for a in analyze_export(export)] == [("conv", 37 * 4)]  # type: ignore[arg-type]
    _settle(folder, conv)
    analyze_export(export)  # type: ignore[arg-type]
    _layer(folder, "fc", 8)
    assert [a.name for a in analyze_export(export)] == ["conv", "fc"]  # type: ignore[arg-type]


# -- the emulated PMU's boundary symbols ----------------------------------------------------


@needs(shutil.which("cc") is not None or shutil.which("gcc") is not None, "no C compiler")
def test_the_pmu_boundaries_are_kept_in_memory_and_a_rebuilt_firmware_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cc = find_c_compiler(purpose="a test firmware")
    elf = tmp_path / "firmware.elf"

    def build(with_cycles: bool) -> None:
        source = tmp_path / "firmware.c"
        cycles = "void aidge_qemu_cycles(void) {}\n" if with_cycles else ""
        source.write_text(
            f"int model_forward(void) {{ return 0; }}\n{cycles}int main(void) {{ return 0; }}\n"
        )
        subprocess.run([cc, "-O0", "-o", str(elf), str(source)], check=True)

    build(with_cycles=True)
    _settle(elf)
    reads: list[Path] = []
    real = pmu.read_elf

    def counting(path: Path, **kw: bool):  # type: ignore[no-untyped-def]
        reads.append(path)
        return real(path, **kw)

    monkeypatch.setattr(pmu, "read_elf", counting)
    pmu._SYMBOLS.clear()
    first = PmuSymbols.of(elf)
    assert first.cycles is not None and PmuSymbols.of(elf) == first and len(reads) == 1
    build(with_cycles=False)  # the firmware rebuilt in place
    assert PmuSymbols.of(elf).cycles is None and len(reads) == 2


# -- the export's memory plan and its Makefile's compiler -----------------------------------


def test_the_memory_plan_is_kept_in_memory_and_sees_every_change(export_dir: Path) -> None:
    src = export_dir / "dnn" / "src"
    src.mkdir()
    forward = src / "forward.cpp"
    forward.write_text("static uint8_t mem_0[1200];\n")
    info = export_dir / "stats" / "memory_info.txt"
    info.parent.mkdir()
    info.write_text("[MEM_0]\n offset: 0 size: 64\n")
    _settle(src, forward, info)
    export = SimpleNamespace(path=export_dir, manifest=SimpleNamespace(memory_peak_bytes=None))
    artifact._PEAKS.clear()
    assert artifact.memory_peaks(export) == (1200,)  # type: ignore[arg-type]
    assert artifact._PEAKS.get(str(export_dir)) == (1200,)  # kept
    _rewrite_keeping_size_and_mtime(forward, "static uint8_t mem_0[1300];\n")
    assert artifact.memory_peaks(export) == (1300,)  # type: ignore[arg-type]
    _settle(forward)
    artifact.memory_peaks(export)  # type: ignore[arg-type]
    (src / "other.c").write_text("static uint8_t mem_1[80];\n")
    assert artifact.memory_peaks(export) == (1300, 80)  # type: ignore[arg-type]
    _settle(src)
    forward.unlink()
    (src / "other.c").unlink()
    artifact.memory_peaks(export)  # type: ignore[arg-type]
    _settle(src)
    assert artifact.memory_peaks(export) == (64,)  # type: ignore[arg-type]
    assert artifact._PEAKS.get(str(export_dir)) == (64,)
    _rewrite_keeping_size_and_mtime(info, "[MEM_0]\n offset: 0 size: 96\n")
    assert artifact.memory_peaks(export) == (96,)  # type: ignore[arg-type]


def test_the_makefile_compiler_is_kept_in_memory_and_a_changed_makefile_is_read_again(
    export_dir: Path,
) -> None:
    makefile = export_dir / "Makefile"
    makefile.write_text("CC = riscv32-unknown-elf-gcc\n")
    _settle(makefile)
    buildsys._MAKEFILE_COMPILERS.clear()
    assert buildsys._makefile_compiler(export_dir) == "riscv32-unknown-elf-gcc"
    assert buildsys._MAKEFILE_COMPILERS.get(str(makefile)) == "riscv32-unknown-elf-gcc"
    _rewrite_keeping_size_and_mtime(makefile, "CC = riscv64-unknown-elf-gcc\n")
    assert buildsys._makefile_compiler(export_dir) == "riscv64-unknown-elf-gcc"
    _settle(makefile)
    buildsys._makefile_compiler(export_dir)
    _rewrite_keeping_size_and_mtime(makefile, "CC = gcc".ljust(28) + "\n")
    assert buildsys._makefile_compiler(export_dir) is None
    makefile.unlink()
    assert buildsys._makefile_compiler(export_dir) is None


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("CXX = arm-none-eabi-g++\n", "arm-none-eabi-g++"),
        ("CXX=arm-none-eabi-g++ -mcpu=cortex-m4\n", "arm-none-eabi-g++"),
        ("CC := riscv32-unknown-elf-gcc\n", "riscv32-unknown-elf-gcc"),
        ("CC = arm-none-eabi-gcc-12\n", "arm-none-eabi-gcc-12"),
        ("CC = arm-none-eabi-gcc.exe\n", None),
        ("CC = gcc\n", None),
    ],
)
def test_the_makefile_compiler_is_the_whole_name(
    export_dir: Path, line: str, named: str | None
) -> None:
    """``g++`` ends in no word character: a name read up to a word boundary missed it."""
    (export_dir / "Makefile").write_text(line)
    buildsys._MAKEFILE_COMPILERS.clear()
    assert buildsys._makefile_compiler(export_dir) == named


def test_a_cached_build_is_kept_in_memory_and_a_removed_artifact_or_new_stamp_is_seen(
    tmp_path: Path,
) -> None:
    entry = tmp_path / "builds" / "export-0123"
    (entry / "bin").mkdir(parents=True)
    elf = entry / "bin" / "run.elf"
    elf.write_bytes(b"\x7fELF firmware")
    stamp = entry / buildsys.STAMP_NAME
    digest = "a" * 64

    def write_stamp(export_hash: str) -> None:
        stamp.write_text(
            json.dumps({"export_hash": export_hash, "artifact": "bin/run.elf", "log_tail": "ok"})
        )

    write_stamp(digest)
    _settle(elf, stamp)
    plan = buildsys.BuildPlan(
        "make", tmp_path, entry, (), "bin/run.elf", entry, cache_entry=True, digest=digest
    )
    buildsys._CACHED.clear()
    first = buildsys._cached_build(plan, digest, (1200,))
    assert first is not None and first.artifact_path == elf and first.log == "ok"
    assert buildsys._cached_build(plan, digest, (1200,)) is first  # kept
    elf.unlink()
    assert buildsys._cached_build(plan, digest, (1200,)) is None
    elf.write_bytes(b"\x7fELF firmware")
    _settle(elf)
    assert buildsys._cached_build(plan, digest, (1200,)) == first
    assert buildsys._cached_build(plan, digest, (1200,)) is not None
    before = stamp.stat()
    write_stamp("b" * 64)  # another export's build took the entry
    os.utime(stamp, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert buildsys._cached_build(plan, digest, (1200,)) is None
