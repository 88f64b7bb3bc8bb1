"""The one ELF reader (aidge_deploy.elf) against binutils, and its three readers agreeing on it:
the memory report, the flasher's image and the emulated PMU's boundary symbols."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from aidge_deploy.boards.baremetal.qemu.pmu import PmuSymbols
from aidge_deploy.elf import ElfReadError, is_elf, read_elf
from aidge_deploy.errors import ConfigError, FlashError
from aidge_deploy.flash.image import load_elf, load_image
from aidge_deploy.profiling.binary import inspect_binary
from testfw import Variant, needs_qemu


def _nm(elf: Path) -> dict[str, tuple[int, str]]:
    out = subprocess.run(
        ["arm-none-eabi-nm", "--defined-only", str(elf)], capture_output=True, text=True, check=True
    ).stdout
    symbols = {}
    for line in out.splitlines():
        value, kind, name = line.split(maxsplit=2)
        symbols[name] = (int(value, 16), kind)
    return symbols


@needs_qemu
def test_symbols_sections_and_segments_match_binutils(
    firmware: Callable[[str, object], Path],
) -> None:
    elf_path = firmware("mps2-an386", Variant.DEMO)
    elf = read_elf(elf_path, segment_data=True, symbols=True)
    assert elf.machine == "EM_ARM"
    nm = _nm(elf_path)
    main = elf.symbol("main")
    assert main is not None and main.type == "STT_FUNC"
    assert main.value & 1, "a Thumb function's value has bit 0 set"
    assert main.address == nm["main"][0] == main.value - 1  # nm prints addresses
    functions = list(elf.functions())
    assert len(functions) > 5
    assert all(nm[f.name][0] == f.address and nm[f.name][1] in "tTwW" for f in functions)
    readelf = subprocess.run(
        ["arm-none-eabi-readelf", "-lW", str(elf_path)], capture_output=True, text=True, check=True
    ).stdout
    loads = [line.split() for line in readelf.splitlines() if line.strip().startswith("LOAD")]
    assert [(int(w[3], 16), int(w[4], 16)) for w in loads] == [
        (seg.paddr, seg.filesz) for seg in elf.segments
    ]
    assert all(seg.data is not None and len(seg.data) == seg.filesz for seg in elf.segments)
    # .data runs in RAM but is loaded in flash, next to the code
    data = elf.section(".data")
    assert data is not None and data.kind == "data"
    assert elf.load_address_of(data.address) != data.address


@needs_qemu
def test_memory_report_flasher_and_pmu_read_the_same_elf(
    firmware: Callable[[str, object], Path],
) -> None:
    elf_path = firmware("mps2-an386", Variant.DEMO)
    elf = read_elf(elf_path)
    info = inspect_binary(elf_path)
    image = load_elf(elf_path)
    assert info.machine == elf.machine
    assert info.flash_bytes == image.size == sum(seg.filesz for seg in elf.segments)
    vectors = elf.section(".isr_vector") or elf.section(".vectors")
    assert vectors is not None and image.vector_table == elf.load_address_of(vectors.address)
    # the test firmware is not an Aidge export: it has no model_forward to count around
    with pytest.raises(ConfigError, match="no model_forward symbol"):
        PmuSymbols.of(elf_path)


def test_a_file_that_is_not_an_elf_is_a_typed_error_everywhere(tmp_path: Path) -> None:
    blob = tmp_path / "firmware.bin"
    blob.write_bytes(b"\x00" * 64)
    assert not is_elf(blob)
    with pytest.raises(ElfReadError) as info:
        read_elf(blob)
    assert not info.value.missing
    with pytest.raises(FlashError, match=r"cannot read .* as an ELF file"):
        load_elf(blob)
    with pytest.raises(FlashError, match="no load address"):
        load_image(blob)
    assert inspect_binary(blob).flash_bytes == 64  # a raw artifact: its file size
    with pytest.raises(ConfigError, match="cannot read the symbols"):
        PmuSymbols.of(blob)
    missing = tmp_path / "missing.elf"
    with pytest.raises(ElfReadError) as info:
        read_elf(missing)
    assert info.value.missing
    with pytest.raises(FlashError, match="does not exist"):
        load_elf(missing)


@needs_qemu
def test_an_unchanged_file_is_parsed_once_and_a_rewritten_one_again(
    firmware: Callable[[str, object], Path], tmp_path: Path
) -> None:
    """One deploy reads its firmware three times (memory report, flasher, timing model's
    boundaries): the image is kept while the file is unchanged, never once it is rewritten."""
    elf_path = tmp_path / "firmware.elf"
    elf_path.write_bytes(firmware("mps2-an386", Variant.DEMO).read_bytes())
    plain = read_elf(elf_path)
    assert read_elf(elf_path) is plain
    full = read_elf(elf_path, segment_data=True, symbols=True)  # more than was read: again
    assert full.symbol("main") is not None and full.segments[0].data is not None
    assert read_elf(elf_path) is full  # a superset serves a smaller request
    elf_path.write_bytes(b"\x00" * 64)  # same path, rewritten
    with pytest.raises(ElfReadError):
        read_elf(elf_path)
