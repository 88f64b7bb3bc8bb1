"""The timing models beside ``llvm-mca`` on the hot loops of a real firmware.

A benchmark export is built and run once in QEMU with its core's timing model and the
plugin's block profile (``blocks=FILE``: each block's runs and static cycles); the hottest
blocks that are loops (their last instruction branches back to their first) are
disassembled with ``arm-none-eabi-objdump`` and given to Debian's ``llvm-mca`` for the same
core, which simulates the loop body repeated. Both figures are cycles per iteration: the
model's block cycles (from an empty pipeline; a predicted loop-back branch costs nothing
more on the M7, the refill is added on the M33) against llvm-mca's steady state. Shared by
``tests/test_llvm_mca.py`` and ``benchmarks/mca_crosscheck.py``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from aidge_deploy.boards.baremetal.qemu.estimate import wait_states_of
from aidge_deploy.profiling.qemu_plugin import (
    BlockRun,
    plugin_option,
    plugin_path,
    read_blocks,
)
from aidge_deploy.profiling.timing import load_model, plugin_table_path
from aidge_qemu_descriptors import get_board

#: llvm-mca's name of each board's core, and its triple
MCA_CPU = {
    "cortex-m7": ("thumbv7em-none-eabihf", "cortex-m7"),
    "cortex-m33": ("thumbv8m.main-none-eabihf", "cortex-m33"),
}
_BRANCH = re.compile(
    r"^(b|bl|cbz|cbnz)(eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le)?(\.[nw])?$"
)


#: the stated tolerance (docs/timing.md): each of the hottest blocks that together hold half
#: of a run's cycles, and those blocks weighted by their cycles, within these ratios of the
#: model's cycles to llvm-mca's
TOLERANCE = (0.6, 1.4)


@dataclass(frozen=True)
class HotBlock:
    """A hot block: its address, runs, instructions (objdump's, as llvm-mca's input) and the
    model's static cycles for one pass from an empty pipeline."""

    start: int
    runs: int
    instructions: tuple[str, ...]
    model_cycles: int


def name_of(elf: Path, address: int) -> str:
    """``function+0xoffset`` of ``address`` (the ELF's symbol table)."""
    out = subprocess.run(
        ["arm-none-eabi-nm", "-n", "--defined-only", str(elf)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    best = None
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1] in "tT" and int(fields[0], 16) & ~1 <= address:
            best = (int(fields[0], 16) & ~1, fields[2])
    return f"{best[1]}+{address - best[0]:#x}" if best else f"{address:#x}"


def build_elf(export: Path) -> Path:
    """``make build`` of an emulated board's export; its ELF."""
    subprocess.run(
        ["make", "-C", str(export), "build", "-j2"], check=True, capture_output=True, timeout=900
    )
    (elf,) = (export / "bin").glob("*.elf")
    return elf


def block_profile(elf: Path, board_name: str, out: Path) -> tuple[BlockRun, ...]:
    """Run ``elf`` on the board in QEMU with its core's model and the block profile."""
    board = get_board(board_name)
    model = load_model(board.cpu)
    option = plugin_option(
        plugin_path(),
        [],
        out / "trace",
        timing=plugin_table_path(model, out),
        wait_states=wait_states_of(board),
        count_memory=False,
        blocks=out / "blocks",
    )
    qemu = shutil.which("qemu-system-arm")
    assert qemu is not None
    subprocess.run(
        [qemu, "-M", board.qemu_machine, "-nographic", "-monitor", "none", "-serial", "null",
         "-semihosting-config", "enable=on,target=native",
         "-icount", f"shift={board.icount_shift},align=off,sleep=off", "-kernel", str(elf),
         *option],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    return read_blocks(out / "blocks")


def disassemble(elf: Path, start: int, end: int) -> list[tuple[int, str, str]]:
    """``(address, mnemonic, operands)`` of each instruction in ``[start, end)``."""
    text = subprocess.run(
        ["arm-none-eabi-objdump", "-d", "--no-show-raw-insn", f"--start-address={start:#x}",
         f"--stop-address={end:#x}", str(elf)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    found = []
    for line in text.splitlines():
        match = re.match(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
        if match:
            operands = re.split(r"\s[@;]", match[3])[0].strip()
            found.append((int(match[1], 16), match[2], operands))
    return found


def hot_blocks(elf: Path, blocks: tuple[BlockRun, ...], count: int) -> list[HotBlock]:
    """The ``count`` hottest blocks (runs x static cycles) objdump decodes as QEMU did, as
    llvm-mca's input: a branch ending one goes to the end of the block (its target plays no
    part in one pass); blocks holding an IT instruction are left out (llvm-mca refuses it)."""
    found = []
    for block in blocks:
        insns = disassemble(elf, block.start, block.end)
        if len(insns) != block.instructions or not insns:
            continue  # a literal pool or data decoded as code: not a block objdump agrees on
        if any(m.startswith("it") for _, m, _ in insns):
            continue  # llvm-mca 14 refuses IT blocks ("unsupported instruction")
        text = []
        for _, mnemonic, operands in insns:
            # the width qualifiers go: llvm-mca's assembler picks the encoding (LLVM 14
            # refuses some of objdump's, such as ldr.w with a negative offset)
            name = _plain(mnemonic)
            if _BRANCH.match(name):
                register = re.match(r"^(r\d+),", operands)  # CBZ/CBNZ
                text.append(f"{name} {register[1]}, 2f" if register else f"{name} 2f")
            else:
                text.append(f"{name} {operands}".strip())
        found.append(HotBlock(block.start, block.runs, tuple(text), block.static_cycles))
        if len(found) == count:
            break
    return found


def _plain(mnemonic: str) -> str:
    return re.sub(r"\.[nw]$", "", mnemonic)


def _has(model: object, name: str) -> bool:
    try:
        return bool(model.value(name))  # type: ignore[attr-defined]
    except KeyError:
        return False


def mca_cycles(block: HotBlock, core: str, work: Path, iterations: int = 1) -> float:
    """llvm-mca's cycles per iteration of ``block`` for ``core`` (one pass by default)."""
    triple, cpu = MCA_CPU[core]
    source = work / f"block_{block.start:x}.s"
    source.write_text(
        ".syntax unified\n.thumb\n" + "".join(f"    {i}\n" for i in block.instructions) + "2:\n",
        encoding="ascii",
    )
    mca = shutil.which("llvm-mca")
    assert mca is not None
    done = subprocess.run(
        [mca, f"-mtriple={triple}", f"-mcpu={cpu}", f"-iterations={iterations}", str(source)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + source.read_text()
    total = re.search(r"^Total Cycles:\s+(\d+)", done.stdout, re.MULTILINE)
    assert total, done.stdout
    return int(total[1]) / iterations
