"""Builds the bare-metal test firmware the QEMU/flash/serial tests run.

The tests need a real Cortex-M image that they control completely (independent of the
board BSPs in ``aidge_qemu_boards``): it prints known lines, can hang, echo or fail on
demand, and can be linked where no memory exists. Building takes ~0.1 s per variant with
the Debian ``arm-none-eabi-gcc``; the test modules call ``build_firmware`` from a
session-scoped fixture.
"""

from __future__ import annotations

import shutil
import subprocess
from enum import StrEnum
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parent
SOURCES = ("startup.c", "uart.c", "main.c", "blob.S")
BOARD_DEFINES = {"mps2-an386": "BOARD_MPS2_AN386", "netduinoplus2": "BOARD_NETDUINOPLUS2"}
CPU_FLAGS = ("-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard")
BLOB_WORDS = 3072


class Variant(StrEnum):
    """What the firmware does after its banner lines."""

    DEMO = "demo"  # prints END DEMO, semihosting exit 0
    HANG = "hang"  # never prints END
    ECHO = "echo"  # echoes received lines until "quit"
    FAIL = "fail"  # semihosting exit 1 without END
    OUTSIDE_FLASH = "outside-flash"  # DEMO linked at 0x30000000 (no memory there)


_VARIANT_DEFINES = {
    Variant.DEMO: (),
    Variant.HANG: ("-DVARIANT_HANG",),
    Variant.ECHO: ("-DVARIANT_ECHO",),
    Variant.FAIL: ("-DVARIANT_FAIL",),
    Variant.OUTSIDE_FLASH: ("-DLINK_OUTSIDE_FLASH",),
}


def toolchain_available() -> bool:
    return shutil.which("arm-none-eabi-gcc") is not None


def build_firmware(board: str, variant: Variant, out_dir: Path) -> Path:
    """Compile and link one variant for one board; returns the ELF path."""
    gcc = shutil.which("arm-none-eabi-gcc")
    if gcc is None:
        raise RuntimeError("arm-none-eabi-gcc is not installed")
    defines = (f"-D{BOARD_DEFINES[board]}", *_VARIANT_DEFINES[variant])
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{board}-{variant.value}"
    linker_script = out_dir / f"{stem}.ld"
    elf = out_dir / f"{stem}.elf"
    subprocess.run(
        [
            gcc,
            "-E",
            "-P",
            "-x",
            "c",
            *defines,
            str(SOURCE_DIR / "link.ld.S"),
            "-o",
            str(linker_script),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    subprocess.run(
        [
            gcc,
            *CPU_FLAGS,
            *defines,
            "-O2",
            "-g",
            "-ffreestanding",
            "-nostdlib",
            "-nostartfiles",
            "-Wall",
            "-Werror",
            f"-I{SOURCE_DIR}",
            *(str(SOURCE_DIR / name) for name in SOURCES),
            f"-Wl,-T,{linker_script}",
            "-Wl,--gc-sections",
            "-lgcc",
            "-o",
            str(elf),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return elf


def expected_checksum() -> int:
    """The FNV-1a-style checksum main() prints over the LCG blob of blob.S."""
    lcg = 12345
    acc = 2166136261
    for _ in range(BLOB_WORDS):
        lcg = (lcg * 1103515245 + 12345) & 0xFFFFFFFF
        acc = ((acc ^ lcg) * 16777619) & 0xFFFFFFFF
    return acc
