"""Descriptors of the QEMU-emulated Cortex-M boards: the one source of their facts.

Why a package of its own: importing it has no side effect and imports nothing heavy. The
plug-in :mod:`aidge_qemu_boards` builds each board's hardware model
(``aidge_core.hw_model``) from these descriptors and registers it with Aidge when imported,
which costs a second of ``aidge_core`` and matplotlib; the deploy side reads the same
descriptors at run time (QEMU command line, clock, memories, UART), so a run whose export
is cached never imports Aidge.

A descriptor says what a runner needs to *start* the emulated board and to *interpret* what
it prints: the QEMU machine, the icount shift that makes SysTick deterministic, the core
clock, the memories of its hardware model, the memory regions the linker script uses (to
check an ELF fits before running it) and the UART the firmware talks on. Every number here
was checked against QEMU 7.2 (``info mtree -f`` and firmware probes); the same numbers are
written in each board's linker script and ``board.h``.

Timing model: QEMU implements no DWT cycle counter and no M55 PMU, but SysTick works. Under
``-icount shift=N,align=off,sleep=off`` every guest instruction advances virtual time by
``2**N`` ns, and SysTick counts virtual time at ``cpu_hz``. The firmware's "cycles" (a
SysTick-derived 64-bit counter behind ``DWT->CYCCNT``) are therefore
``instructions * 2**N * cpu_hz / 1e9``, i.e. an emulated instruction count (CPI = 1 model),
never real cycles. :func:`ticks_to_instructions` does the inverse conversion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

__all__ = [
    "LINEAR_ENTRY_MARK",
    "QEMU_BINARY",
    "MemoryRegion",
    "ModelMemory",
    "QemuBoard",
    "RegionKind",
    "SecondCore",
    "UartKind",
    "WaitStateRegion",
    "get_board",
    "icount_shift_for",
    "list_boards",
    "qemu_command",
    "ticks_to_instructions",
]

QEMU_BINARY = "qemu-system-arm"
#: written in the benchmark entry the boards' plug-in renders (one forward per timed
#: iteration); an export without it has the exporter's entry (max(10, N) per iteration)
LINEAR_ENTRY_MARK = "AIDGE_QEMU_LINEAR_TIMING"
KIB = 1024
MIB = 1024 * KIB


class UartKind(StrEnum):
    """Which UART peripheral model carries the console (``serial0`` in QEMU)."""

    CMSDK_APB = "cmsdk_apb"  # Arm CMSDK APB UART (MPS2/MPS3 FPGA images)
    STM32_USART = "stm32_usart"  # STM32F2/F4 USART


class RegionKind(StrEnum):
    """Whether a memory region holds load-time content only (ROM) or is writable (RAM)."""

    ROM = "rom"
    RAM = "ram"


@dataclass(frozen=True)
class MemoryRegion:
    """One linker-script ``MEMORY`` region of a board, with its real size in QEMU."""

    name: str
    origin: int
    size: int
    kind: RegionKind
    purpose: str

    @property
    def end(self) -> int:
        """First address past the region."""
        return self.origin + self.size

    def contains(self, address: int, length: int = 1) -> bool:
        """True when ``[address, address + length)`` lies inside the region."""
        return self.origin <= address and address + max(length, 1) <= self.end


@dataclass(frozen=True)
class WaitStateRegion:
    """A memory region the core reads with wait states (the board's memory timing), as the
    emulated PMU's timing model prices them; ``source`` says where the figure comes from."""

    name: str
    origin: int
    size: int
    wait_states: int
    source: str


@dataclass(frozen=True)
class ModelMemory:
    """One memory of a board's hardware model, as ``aidge_core.hw_model`` declares it.

    ``name`` is the device attribute holding it (the hardware model's ``memories`` mapping
    is keyed by it), ``kind`` says whether it holds the weights (ROM: flash) or the
    activations (RAM), and ``priority`` is the exporter's placement order (lower first).
    """

    name: str
    capacity: int
    kind: RegionKind
    priority: int


@dataclass(frozen=True)
class SecondCore:
    """The second core of a dual-core board, held at reset until the first releases it.

    On the SSE-200 (mps2-an521) CPU1 starts powered off (``CPUWAIT`` bit 1 set at reset):
    core 0 writes CPU1's vector table address to ``INITSVTOR1`` and clears the bit in the
    system control block's ``CPUWAIT``; CPU1 then resets from that table. Each core links
    into its own halves of the code and data SRAMs, prints on its own UART, and the two
    meet in a shared SRAM (``shared_origin``) no linker script places anything else in.
    """

    elf_name: str
    vector_table: int
    uart_base: int
    memory_regions: tuple[MemoryRegion, ...]
    shared_origin: int
    shared_size: int
    #: the SSE-200 system control registers core 0 writes to start it (Secure aliases)
    initsvtor_register: int
    cpuwait_register: int
    cpuwait_bit: int


@dataclass(frozen=True)
class QemuBoard:
    """Everything a runner needs to start one emulated board and read its output.

    ``flash_*`` is the non-volatile region holding the model weights (constant data) and
    ``ram_*`` the region holding activations (``.data``/``.bss``/heap); ``memory_regions``
    lists every region the linker script uses, for exact per-section fit checks.
    """

    name: str
    qemu_machine: str
    cpu: str
    cpu_hz: int
    icount_shift: int
    flash_origin: int
    flash_size: int
    ram_origin: int
    ram_size: int
    uart_base: int
    uart_kind: UartKind
    uart_handle: str
    hal_board: str
    gcc_cpu_flags: tuple[str, ...]
    memory_regions: tuple[MemoryRegion, ...]
    elf_name: str
    qemu_min_version: str = "7.2"
    baudrate: int = 115200
    #: regions read with wait states at ``cpu_hz`` (none: zero-wait SRAM / TCM everywhere)
    wait_states: tuple[WaitStateRegion, ...] = ()
    #: a second core core 0 can start (heterogeneous exports run a program on each)
    second_core: SecondCore | None = None
    #: QEMU options the board needs beyond ``-M`` (device properties)
    qemu_args: tuple[str, ...] = ()

    @property
    def expected_artifact(self) -> str:
        """Path of the firmware inside a built export (``make build`` writes it there); on a
        dual-core board a pattern matching each core's ELF, core 0's first."""
        if self.second_core is not None:
            stem = self.elf_name.removesuffix("_core0.elf")
            return f"bin/{stem}_core[0-9].elf"
        return f"bin/{self.elf_name}"

    @property
    def model_memories(self) -> tuple[ModelMemory, ...]:
        """The memories of the board's hardware model, in its order: activations in SRAM
        first, weights in flash (the same priorities as the STM32 targets)."""
        return (
            ModelMemory("sram", self.ram_size, RegionKind.RAM, priority=0),
            ModelMemory("flash", self.flash_size, RegionKind.ROM, priority=2),
        )

    @property
    def ticks_per_instruction(self) -> float:
        """SysTick ticks one guest instruction is worth under this board's icount shift."""
        return self.cpu_hz * (2**self.icount_shift) / 1e9

    def region_at(self, address: int, length: int = 1) -> MemoryRegion | None:
        """The region containing ``[address, address + length)``, if any."""
        for region in self.memory_regions:
            if region.contains(address, length):
                return region
        return None


def icount_shift_for(cpu_hz: int) -> int:
    """Smallest shift giving at least one SysTick tick per emulated instruction.

    ``ceil(log2(1e9 / cpu_hz))``: with a smaller shift one instruction is worth less than a
    tick and the counter loses resolution; a larger one only inflates the numbers.
    """
    if cpu_hz <= 0:
        raise ValueError(f"cpu_hz must be positive, got {cpu_hz}")
    return max(0, math.ceil(math.log2(1e9 / cpu_hz)))


def _mps2_an386() -> QemuBoard:
    return QemuBoard(
        name="mps2-an386",
        qemu_machine="mps2-an386",
        cpu="cortex-m4",
        cpu_hz=25_000_000,
        icount_shift=icount_shift_for(25_000_000),
        flash_origin=0x0000_0000,
        flash_size=4 * MIB,
        ram_origin=0x2000_0000,
        ram_size=4 * MIB,
        uart_base=0x4000_4000,
        uart_kind=UartKind.CMSDK_APB,
        uart_handle="huart0",
        hal_board="mps2",
        gcc_cpu_flags=("-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"),
        memory_regions=(
            MemoryRegion("FLASH", 0x0000_0000, 4 * MIB, RegionKind.ROM, "SSRAM1: code, rodata"),
            MemoryRegion("RAM", 0x2000_0000, 4 * MIB, RegionKind.RAM, "SSRAM2/3: data, stack"),
        ),
        elf_name="aidge_mps2_an386.elf",
    )


def _mps3_an547() -> QemuBoard:
    return QemuBoard(
        name="mps3-an547",
        qemu_machine="mps3-an547",
        cpu="cortex-m55",
        cpu_hz=32_000_000,
        icount_shift=icount_shift_for(32_000_000),
        flash_origin=0x2800_0000,
        flash_size=8 * MIB,
        ram_origin=0x2100_0000,
        ram_size=4 * MIB,
        uart_base=0x4930_3000,
        uart_kind=UartKind.CMSDK_APB,
        uart_handle="huart0",
        hal_board="mps3",
        gcc_cpu_flags=("-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"),
        memory_regions=(
            MemoryRegion("ITCM", 0x0000_0000, 512 * KIB, RegionKind.ROM, "vectors, code"),
            MemoryRegion("QSPI", 0x2800_0000, 8 * MIB, RegionKind.ROM, "rodata (weights)"),
            MemoryRegion("DTCM", 0x2000_0000, 512 * KIB, RegionKind.RAM, "stack"),
            MemoryRegion("ISRAM", 0x2100_0000, 4 * MIB, RegionKind.RAM, "data, bss, heap"),
        ),
        elf_name="aidge_mps3_an547.elf",
    )


def _netduinoplus2() -> QemuBoard:
    return QemuBoard(
        name="netduinoplus2",
        qemu_machine="netduinoplus2",
        cpu="cortex-m4",
        cpu_hz=168_000_000,
        icount_shift=icount_shift_for(168_000_000),
        flash_origin=0x0800_0000,
        flash_size=1 * MIB,
        ram_origin=0x2000_0000,
        ram_size=192 * KIB,
        uart_base=0x4001_1000,
        uart_kind=UartKind.STM32_USART,
        uart_handle="huart1",
        hal_board="stm32f4",
        gcc_cpu_flags=("-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"),
        memory_regions=(
            MemoryRegion("FLASH", 0x0800_0000, 1 * MIB, RegionKind.ROM, "code, rodata"),
            MemoryRegion("RAM", 0x2000_0000, 192 * KIB, RegionKind.RAM, "data, bss, stack"),
        ),
        elf_name="aidge_netduinoplus2.elf",
        wait_states=(
            WaitStateRegion(
                "FLASH",
                0x0800_0000,
                1 * MIB,
                5,
                "STM32F405 reference manual (RM0090) 3.5.1, Table 10: 5 wait states for "
                "HCLK 150-168 MHz at 2.7-3.6 V; the ART accelerator's prefetch and caches "
                "are not modelled",
            ),
        ),
    )


def _mps2_an500() -> QemuBoard:
    return QemuBoard(
        name="mps2-an500",
        qemu_machine="mps2-an500",
        cpu="cortex-m7",
        cpu_hz=25_000_000,
        icount_shift=icount_shift_for(25_000_000),
        flash_origin=0x0000_0000,
        flash_size=4 * MIB,
        ram_origin=0x2000_0000,
        ram_size=4 * MIB,
        uart_base=0x4000_4000,
        uart_kind=UartKind.CMSDK_APB,
        uart_handle="huart0",
        hal_board="mps2",
        # QEMU's Cortex-M7 has the double-precision FPv5 (MVFR0 0x10110221)
        gcc_cpu_flags=("-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-d16", "-mfloat-abi=hard"),
        memory_regions=(
            MemoryRegion("FLASH", 0x0000_0000, 4 * MIB, RegionKind.ROM, "SSRAM1: code, rodata"),
            MemoryRegion("RAM", 0x2000_0000, 4 * MIB, RegionKind.RAM, "SSRAM2/3: data, stack"),
        ),
        elf_name="aidge_mps2_an500.elf",
    )


def _mps2_an505() -> QemuBoard:
    return QemuBoard(
        name="mps2-an505",
        qemu_machine="mps2-an505",
        cpu="cortex-m33",
        cpu_hz=20_000_000,
        icount_shift=icount_shift_for(20_000_000),
        flash_origin=0x1000_0000,
        flash_size=4 * MIB,
        ram_origin=0x3800_0000,
        ram_size=4 * MIB,
        uart_base=0x5020_0000,
        uart_kind=UartKind.CMSDK_APB,
        uart_handle="huart0",
        hal_board="mps2",
        gcc_cpu_flags=("-mcpu=cortex-m33", "-mthumb", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"),
        memory_regions=(
            # the Secure aliases: the core boots Secure from 0x10000000 (QEMU reads the reset
            # vector there, through the memory protection controller, before anything runs)
            MemoryRegion("FLASH", 0x1000_0000, 4 * MIB, RegionKind.ROM, "SSRAM1: code, rodata"),
            MemoryRegion("RAM", 0x3800_0000, 4 * MIB, RegionKind.RAM, "SSRAM2/3: data, stack"),
        ),
        elf_name="aidge_mps2_an505.elf",
    )


def _mps2_an521() -> QemuBoard:
    # The SSE-200 of the AN505 with both its Cortex-M33 cores: the same memory map, split
    # between them (QEMU 7.2 ``info mtree``: SSRAM1 4 MB at 0x10000000, SSRAM2 and SSRAM3
    # 2 MB each at 0x38000000 and 0x38200000, the SSE-200's four 32 KB internal SRAM banks
    # at 0x30000000, the system control block at 0x50021000; Secure aliases throughout).
    return QemuBoard(
        name="mps2-an521",
        qemu_machine="mps2-an521",
        cpu="cortex-m33",
        cpu_hz=20_000_000,
        icount_shift=icount_shift_for(20_000_000),
        flash_origin=0x1000_0000,
        flash_size=2 * MIB,
        ram_origin=0x3800_0000,
        ram_size=2 * MIB,
        uart_base=0x5020_0000,
        uart_kind=UartKind.CMSDK_APB,
        uart_handle="huart0",
        hal_board="mps2",
        gcc_cpu_flags=("-mcpu=cortex-m33", "-mthumb", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"),
        memory_regions=(
            MemoryRegion("FLASH", 0x1000_0000, 2 * MIB, RegionKind.ROM, "SSRAM1 low: core 0 code"),
            MemoryRegion("RAM", 0x3800_0000, 2 * MIB, RegionKind.RAM, "SSRAM2: core 0 data"),
            MemoryRegion("SHARED", 0x3000_0000, 32 * KIB, RegionKind.RAM, "SRAM bank 0: shared"),
        ),
        elf_name="aidge_mps2_an521_core0.elf",
        # QEMU models the AN521's CPU0 without FPU and DSP (the FPGA image's SSE-200
        # configuration; CPU1 has both), and the Aidge kernels need the DSP extension: the
        # SSE-200's own CPU0_FPU / CPU0_DSP configuration parameters are set on
        qemu_args=("-global", "sse-200.CPU0_FPU=on", "-global", "sse-200.CPU0_DSP=on"),
        second_core=SecondCore(
            elf_name="aidge_mps2_an521_core1.elf",
            vector_table=0x1020_0000,
            uart_base=0x5020_1000,
            memory_regions=(
                MemoryRegion(
                    "FLASH", 0x1020_0000, 2 * MIB, RegionKind.ROM, "SSRAM1 high: core 1 code"
                ),
                MemoryRegion("RAM", 0x3820_0000, 2 * MIB, RegionKind.RAM, "SSRAM3: core 1 data"),
                MemoryRegion("SHARED", 0x3000_0000, 32 * KIB, RegionKind.RAM, "SRAM bank 0"),
            ),
            shared_origin=0x3000_0000,
            shared_size=32 * KIB,
            initsvtor_register=0x5002_1114,
            cpuwait_register=0x5002_1118,
            cpuwait_bit=1,
        ),
    )


_BOARDS: dict[str, QemuBoard] = {
    board.name: board
    for board in (
        _mps2_an386(),
        _mps2_an500(),
        _mps2_an505(),
        _mps2_an521(),
        _mps3_an547(),
        _netduinoplus2(),
    )
}


def list_boards() -> list[QemuBoard]:
    """All emulated boards, sorted by name."""
    return [_BOARDS[name] for name in sorted(_BOARDS)]


def get_board(name: str) -> QemuBoard:
    """The board called ``name`` (case-insensitive); ``KeyError`` lists the known ones."""
    try:
        return _BOARDS[name.lower()]
    except KeyError:
        known = ", ".join(sorted(_BOARDS))
        raise KeyError(f"Unknown QEMU board {name!r}. Known boards: {known}") from None


def ticks_to_instructions(board: QemuBoard, ticks: float) -> float:
    """Convert SysTick-derived "cycles" printed by the firmware into emulated instructions.

    Under ``-icount shift=N`` one instruction is ``2**N`` ns of virtual time and SysTick
    counts ``cpu_hz`` ticks per virtual second, so
    ``instructions = ticks * 1e9 / (cpu_hz * 2**N)``. Only valid for runs started with the
    board's own ``icount_shift`` (as :func:`qemu_command` does).
    """
    return float(ticks) * 1e9 / (board.cpu_hz * (2**board.icount_shift))


def qemu_command(
    board: QemuBoard,
    elf: Path | str,
    *,
    serial: str = "stdio",
    semihosting: bool = True,
    extra_args: tuple[str, ...] = (),
) -> list[str]:
    """argv that runs ``elf`` on ``board`` headless with deterministic icount timing.

    ``serial`` is a QEMU chardev spec for the console UART (``stdio``,
    ``tcp:127.0.0.1:PORT,server=on,wait=on``, ``pty`` ...). With ``semihosting`` the
    firmware's ``SYS_EXIT`` after the ``END DEMO`` banner ends QEMU with the firmware's
    exit status.
    """
    argv = [
        QEMU_BINARY,
        "-M",
        board.qemu_machine,
        "-nographic",
        "-monitor",
        "none",
        "-serial",
        serial,
    ]
    if semihosting:
        argv += ["-semihosting-config", "enable=on,target=native"]
    argv += [
        "-icount",
        f"shift={board.icount_shift},align=off,sleep=off",
        *board.qemu_args,
        *extra_args,
        "-kernel",
        str(elf),
    ]
    return argv
