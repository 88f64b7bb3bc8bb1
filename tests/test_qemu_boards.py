"""The ``aidge_qemu_boards`` plug-in: registration, BSP consistency and real QEMU runs.

The fast tests check the board descriptors against the hardware model, the exporter
registration and the BSP files (linker scripts, ``board.h``, ``board.mk``). The slow ones
export ``modelzoo.tiny_cnn`` with the real Aidge exporter for every emulated board, build it
with ``make build`` (arm-none-eabi-gcc) and run it in ``qemu-system-arm`` with icount, then
check what the firmware prints against onnxruntime (or the host int8 export). Each export +
build happens once per module. The UART output is parsed here with small regexes on purpose:
the protocol parsers of ``aidge_deploy`` are tested on the logs captured from these runs.

The QEMU helpers (:class:`QemuSession`, :func:`export_and_build`, the drivers) are also used
by ``tests/data/logs/qemu/capture_logs.py`` to record those logs.
"""

from __future__ import annotations

import contextlib
import filecmp
import json
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import pytest

from envparts import missing, needs

sys.path.insert(0, str(Path(__file__).parent))

import aidge_qemu_boards
import modelzoo
from aidge_qemu_boards import (
    LINEAR_ENTRY_MARK,
    QemuBoard,
    RegionKind,
    get_board,
    list_boards,
    qemu_command,
    ticks_to_instructions,
)

BOARD_NAMES = [board.name for board in list_boards()]
BUILD_TIMEOUT_S = 300.0
RUN_TIMEOUT_S = 30.0
TOOLS = ("qemu-system-arm", "arm-none-eabi-gcc", "arm-none-eabi-g++", "make")
MISSING_TOOLS = [tool for tool in TOOLS if shutil.which(tool) is None]
needs_qemu = needs(not MISSING_TOOLS, f"not installed: {', '.join(MISSING_TOOLS)}")

FLOAT = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


# --------------------------------------------------------------------------- helpers


@dataclass(frozen=True)
class BuiltExport:
    """An exported and built project: its folder, firmware, manifest and build log."""

    path: Path
    elf: Path
    manifest: dict[str, Any]
    build_log: str
    board: QemuBoard


def tiny_input_tensor(x: np.ndarray) -> Any:
    """The input as the Cortex-M benchmark helpers pass it: a CPU tensor tagged NCHW."""
    import aidge_core

    tensor = aidge_core.Tensor(x)
    tensor.set_backend("cpu")
    if x.ndim == 4:
        # Untagged, a 3-channel input is misread by the layout adaptation (contract §5.4).
        tensor.to_dformat(aidge_core.dformat.nchw)
    return tensor


def export_project(
    model_path: Path,
    x: np.ndarray,
    target: str,
    out_dir: Path,
    *,
    dtype: str = "float32",
    **app: Any,
) -> Path:
    """Run the real ``aidge_core.export_utils.export`` (no compile) into ``out_dir``."""
    import aidge_onnx
    from aidge_core.export_utils import export
    from aidge_core.export_utils.artifact import ExportApplication
    from aidge_core.export_utils.config import ExportConfig

    graph = aidge_onnx.load_onnx(str(model_path))
    config = ExportConfig(
        target=target,
        export_folder=str(out_dir),
        dtype=dtype,
        compile=False,
        application=ExportApplication(**app),
    )
    # export() drops exported_graph.mmd into the working directory.
    with contextlib.chdir(out_dir.parent):
        artifact = export(graph, config, [tiny_input_tensor(x)])
    return Path(artifact.path).resolve()


def make_build(project: Path) -> subprocess.CompletedProcess[str]:
    """``make build`` exactly as ``compile_export`` runs it for MAKE targets."""
    return subprocess.run(
        ["make", "build", "-j2", "AIDGE_CMP=false"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )


def export_and_build(
    model_path: Path,
    x: np.ndarray,
    board: QemuBoard,
    out_dir: Path,
    *,
    dtype: str = "float32",
    **app: Any,
) -> BuiltExport:
    project = export_project(model_path, x, board.name, out_dir, dtype=dtype, **app)
    result = make_build(project)
    log = result.stdout + result.stderr
    if result.returncode != 0:
        raise AssertionError(f"make build failed in {project}:\n{log[-3000:]}")
    manifest = json.loads((project / ".aidge-export.json").read_text())
    elves = sorted(project.glob(manifest["expected_artifact"]))
    assert len(elves) == 1, f"expected one ELF for {manifest['expected_artifact']}: {elves}"
    return BuiltExport(project, elves[0], manifest, log, board)


class QemuSession:
    """``qemu-system-arm`` with the console UART on stdin/stdout, read by a thread.

    ``raw`` holds every byte the firmware sent, unmodified (``\\r`` included).
    """

    def __init__(self, board: QemuBoard, elf: Path, *, interactive: bool = False) -> None:
        self.argv = qemu_command(board, elf)
        self._proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE if interactive else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._buffer = bytearray()
        self._stderr = bytearray()
        self._cond = threading.Condition()
        self._eof = False
        self._threads = [
            threading.Thread(target=self._pump, args=(self._proc.stdout, self._buffer, True)),
            threading.Thread(target=self._pump, args=(self._proc.stderr, self._stderr, False)),
        ]
        for thread in self._threads:
            thread.daemon = True
            thread.start()

    def _pump(self, stream: Any, sink: bytearray, is_stdout: bool) -> None:
        while True:
            chunk = stream.read1(4096)
            with self._cond:
                if not chunk:
                    if is_stdout:
                        self._eof = True
                    self._cond.notify_all()
                    return
                sink.extend(chunk)
                self._cond.notify_all()

    @property
    def raw(self) -> bytes:
        with self._cond:
            return bytes(self._buffer)

    @property
    def stderr(self) -> str:
        with self._cond:
            return self._stderr.decode(errors="replace")

    def wait_for(self, pattern: bytes, timeout: float = RUN_TIMEOUT_S, count: int = 1) -> None:
        """Block until ``pattern`` occurs ``count`` times in the output."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._buffer.count(pattern) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._eof:
                    tail = bytes(self._buffer[-600:])
                    raise AssertionError(
                        f"{pattern!r} x{count} not seen (eof={self._eof}); output tail: {tail!r}"
                    )
                self._cond.wait(min(remaining, 0.5))

    def send(self, data: bytes) -> None:
        assert self._proc.stdin is not None, "session not interactive"
        self._proc.stdin.write(data)
        self._proc.stdin.flush()

    def wait_exit(self, timeout: float = RUN_TIMEOUT_S) -> int:
        try:
            code = self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"QEMU did not exit in {timeout}s; tail: {self.raw[-600:]!r}"
            ) from None
        for thread in self._threads:
            thread.join(timeout=5)
        return code

    def kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=10)
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> QemuSession:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.kill()


def run_to_exit(built: BuiltExport, timeout: float = RUN_TIMEOUT_S) -> tuple[int, bytes]:
    """Run a non-interactive firmware until its semihosting exit."""
    with QemuSession(built.board, built.elf) as session:
        code = session.wait_exit(timeout)
        return code, session.raw


def nhwc_line(x_nchw: np.ndarray) -> bytes:
    """One validation sample as the firmware reads it: exported (NHWC) order, one line."""
    values = np.transpose(x_nchw, (0, 2, 3, 1)).reshape(-1)
    return (" ".join(f"{v:.9g}" for v in values) + "\n").encode()


def drive_validation(session: QemuSession, samples: list[np.ndarray]) -> list[bytes]:
    """Answer each ``READY <i>`` with sample ``i``, as the host side of the protocol."""
    sent = []
    for index, sample in enumerate(samples):
        session.wait_for(f"READY {index}\n".encode())
        line = nhwc_line(sample)
        session.send(line)
        sent.append(line)
    return sent


def drive_tinyml(session: QemuSession, payload: bytes, *, chunk: int = 32) -> list[bytes]:
    """EEMBC session: name, profile, db load, db <hex> chunks, infer 3 1, results.

    Each command ends with ``%`` and is acknowledged by one more ``m-ready``. Returns the
    commands sent.
    """
    assert chunk <= 62, "db <hex> commands must stay within the 128-char command buffer"
    session.wait_for(b"m-ready")
    commands = [b"name%", b"profile%", f"db load {len(payload)}%".encode()]
    commands += [
        b"db " + payload[i : i + chunk].hex().encode() + b"%" for i in range(0, len(payload), chunk)
    ]
    commands += [b"infer 3 1%", b"results%"]
    for count, command in enumerate(commands, start=2):
        session.send(command)
        session.wait_for(b"m-ready", count=count)
    return commands


def tinyml_payload(size: int, seed: int = 5) -> bytes:
    """Input bytes for ``db``: small values, so the softmax of the logits is not one-hot."""
    return bytes(np.random.default_rng(seed).integers(0, 3, size, dtype=np.uint8))


def parse_output_values(raw: bytes, name: str) -> np.ndarray:
    match = re.search(re.escape(name).encode() + rb":\n\r([^\n]*)\n\r", raw)
    assert match, f"no output block for {name!r} in {raw!r}"
    return np.array([float(v) for v in match.group(1).split()])


def parse_number_line(raw: bytes, key: str) -> list[float]:
    match = re.search(rb"^" + key.encode() + rb": ([^\n]*)\n", raw, re.MULTILINE)
    assert match, f"no {key!r} line in {raw!r}"
    return [float(v) for v in match.group(1).split()]


def parse_named_line(raw: bytes, key: str) -> dict[str, float]:
    match = re.search(rb"^" + key.encode() + rb": ([^\n]*)\n", raw, re.MULTILINE)
    assert match, f"no {key!r} line in {raw!r}"
    pairs = (item.split(b"=", 1) for item in match.group(1).split())
    return {name.decode(): float(value) for name, value in pairs}


def assert_framed(raw: bytes) -> None:
    """The STM32-style banners, CRLF-terminated, in order."""
    start = raw.find(b"****************** DEMO EXPORT ARM ******************\r\n")
    end = raw.find(b"********************** END DEMO *********************\r\n")
    assert 0 <= start < end, f"banners missing or out of order: {raw[:200]!r} ... {raw[-200:]!r}"


def softmax(values: np.ndarray) -> np.ndarray:
    shifted = np.exp(values - values.max())
    return np.asarray(shifted / shifted.sum())


# --------------------------------------------------------------------------- fast tests


def test_board_registry() -> None:
    assert BOARD_NAMES == [
        "mps2-an386",
        "mps2-an500",
        "mps2-an505",
        "mps2-an521",
        "mps3-an547",
        "netduinoplus2",
    ]
    assert get_board("MPS2-AN386") is get_board("mps2-an386")
    with pytest.raises(KeyError, match="Known boards"):
        get_board("stm32h743")
    shifts = {board.name: board.icount_shift for board in list_boards()}
    assert shifts == {
        "mps2-an386": 6,
        "mps2-an500": 6,
        "mps2-an505": 6,
        "mps2-an521": 6,
        "mps3-an547": 5,
        "netduinoplus2": 3,
    }
    for board in list_boards():
        # At least one tick per instruction, but less than two: full resolution, no waste.
        assert 1.0 <= board.ticks_per_instruction < 2.0
        if board.second_core is None:
            assert board.expected_artifact == f"bin/{board.elf_name}"
        else:  # one ELF per core, core 0's first
            assert board.expected_artifact == "bin/aidge_mps2_an521_core[0-9].elf"
        assert board.region_at(board.flash_origin, board.flash_size) is not None
        assert board.region_at(board.ram_origin, board.ram_size) is not None
        assert board.region_at(board.uart_base) is None


def test_ticks_to_instructions() -> None:
    an386 = get_board("mps2-an386")  # 25 MHz, shift 6: 1.6 ticks per instruction
    assert ticks_to_instructions(an386, 1600) == pytest.approx(1000.0)
    an547 = get_board("mps3-an547")  # 32 MHz, shift 5: 1.024 ticks per instruction
    assert ticks_to_instructions(an547, 1024) == pytest.approx(1000.0)
    netduino = get_board("netduinoplus2")  # 168 MHz, shift 3: 1.344 ticks per instruction
    assert ticks_to_instructions(netduino, 1344) == pytest.approx(1000.0)


def test_forwards_per_iteration_tells_the_boards_entry_from_the_exporters(
    tmp_path: Path,
) -> None:
    from aidge_deploy.boards.baremetal.qemu.power import forwards_per_iteration

    linear, exporter, bare = tmp_path / "linear", tmp_path / "exporter", tmp_path / "none"
    for folder, text in ((linear, f"/* {LINEAR_ENTRY_MARK} */"), (exporter, "NB_MODEL_EXECUTIONS")):
        (folder / "Src").mkdir(parents=True)
        (folder / "Src" / "inference_time.hpp").write_text(text)
    assert forwards_per_iteration(linear, 400) == 1
    assert forwards_per_iteration(exporter, 400) == 400  # max(10, N) around each iteration
    assert forwards_per_iteration(exporter, 3) == 10
    assert forwards_per_iteration(bare, 3) == 10  # no entry file: the exporter's rule


def test_qemu_command_line() -> None:
    board = get_board("netduinoplus2")
    assert qemu_command(board, Path("/x/fw.elf")) == [
        "qemu-system-arm",
        "-M",
        "netduinoplus2",
        "-nographic",
        "-monitor",
        "none",
        "-serial",
        "stdio",
        "-semihosting-config",
        "enable=on,target=native",
        "-icount",
        "shift=3,align=off,sleep=off",
        "-kernel",
        "/x/fw.elf",
    ]
    argv = qemu_command(
        board, "fw.elf", serial="tcp:127.0.0.1:4444,server=on,wait=on", semihosting=False
    )
    assert "-semihosting-config" not in argv
    assert argv[argv.index("-serial") + 1] == "tcp:127.0.0.1:4444,server=on,wait=on"


@pytest.mark.parametrize("name", BOARD_NAMES)
def test_hardware_target_registered(name: str) -> None:
    from aidge_core.hw_model import BuildSystem, CortexM, get_target_by_name, is_cmsis_configurable

    board = get_board(name)
    device = get_target_by_name(name, cmsis=False)
    assert device.name == name
    assert isinstance(device.main_pe, CortexM)
    assert device.main_pe.arch == board.cpu
    assert device.main_pe.frequency_hz == board.cpu_hz
    assert device.build_system is BuildSystem.MAKE
    assert device.default_execution_domain.name == "baremetal"
    assert device.default_execution_domain.build_system is BuildSystem.MAKE
    assert device.hal_board == board.hal_board
    assert device.uart_handle == board.uart_handle
    assert device.bsp_package.with_version(None) is device.bsp_package
    assert device.sram.capacity == board.ram_size
    assert device.flash.capacity == board.flash_size
    assert set(device.memories) == {"sram", "flash"}
    assert is_cmsis_configurable(name) is False
    assert get_target_by_name(name, cmsis=True).main_pe.arch == board.cpu


@pytest.mark.parametrize("name", BOARD_NAMES)
def test_deploy_target_reads_the_hardware_model_facts_from_the_descriptor(name: str) -> None:
    """A run reads the board's memories and clock from its descriptor (no ``aidge_core``
    import); they are exactly those of the hardware model built from it."""
    from aidge_deploy.profiling.binary import memory_capacities
    from aidge_deploy.registry import get_deploy_target

    target = get_deploy_target(name)
    device = target.hardware_target
    assert target.memory_capacities() == memory_capacities(device)
    assert [m.role for m in target.memory_capacities()] == ["ram", "flash"]
    assert target.core_clock_hz == device.main_pe.frequency_hz == get_board(name).cpu_hz
    for memory in get_board(name).model_memories:
        assert device.memories[memory.name].capacity == memory.capacity
        assert device.memories[memory.name].priority == memory.priority


def test_descriptors_import_nothing_heavy_and_the_plugin_still_registers() -> None:
    """The descriptors (and an emulated board's deploy target) import no Aidge; the
    plug-in's public names are the descriptors' own; its hardware model, asked for, is
    registered on demand, also when ``aidge_core`` was imported before it (then every
    target registers; the farm's ``api`` pair of the board shares its facts)."""
    import aidge_qemu_boards.boards
    import aidge_qemu_descriptors

    assert aidge_qemu_boards.get_board is aidge_qemu_descriptors.get_board
    assert aidge_qemu_boards.boards.QemuBoard is aidge_qemu_descriptors.QemuBoard

    def probe(before: str, heavy: tuple[str, ...]) -> None:
        code = (
            f"import sys\n{before}\n"
            "import aidge_qemu_descriptors\n"
            "from aidge_deploy.registry import get_deploy_target\n"
            "target = get_deploy_target('mps3-an547')\n"
            "target.memory_capacities(), target.core_clock_hz\n"
            f"heavy = [m for m in {heavy!r} if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "from aidge_deploy.registry import local_target_class, registered_targets\n"
            "assert ('mps3-an547', 'api') in registered_targets()\n"
            "assert target.hardware_target.main_pe.frequency_hz == 32_000_000\n"
            "assert 'aidge_qemu_boards' in sys.modules\n"
            "farm = local_target_class('mps3-an547')\n"
            "assert farm.hardware_target_class is type(target.hardware_target)\n"
        )
        subprocess.run([sys.executable, "-c", code], check=True, timeout=300)

    probe("", ("aidge_core", "aidge_qemu_boards", "matplotlib", "asyncssh"))
    probe("import aidge_core.hw_model", ("aidge_qemu_boards", "asyncssh"))


@pytest.mark.parametrize("name", BOARD_NAMES)
def test_target_export_registered(name: str) -> None:
    from aidge_core.export_utils import get_target_export

    target_export = get_target_export(name)
    assert target_export is aidge_qemu_boards.TARGET_EXPORTS[name]
    assert target_export.expected_artifact == get_board(name).expected_artifact
    assert target_export.main_template is not None and target_export.main_template.is_file()
    assert target_export.assets_root is not None
    board_files = target_export.assets_root / "board_files"
    # Non-empty, so ensure_bsp_package() uses it as is and never downloads.
    assert (board_files / "Makefile").is_file()
    assert (board_files / "bsp" / f"{get_board(name).hal_board}xx_hal.h").is_file()


@pytest.mark.parametrize("name", BOARD_NAMES)
def test_shared_bsp_files_identical_to_common(name: str) -> None:
    """Every board links the shared files of ``assets/common`` (symlinks): they must resolve to them."""
    common = aidge_qemu_boards.ASSETS_ROOT / "common"
    board_root = aidge_qemu_boards.assets_root_for(name)
    mapping = {path.relative_to(common): path for path in common.rglob("*") if path.is_file()}
    assert mapping, "assets/common is empty"
    for relative, source in mapping.items():
        if relative.parts[0] == "templates":
            copy = board_root / relative
        else:
            copy = board_root / "board_files" / relative
        assert copy.is_file(), f"{copy} missing (link it to {source})"
        assert copy.is_symlink() and copy.resolve() == source.resolve(), (
            f"{copy} should link {source}"
        )
        assert filecmp.cmp(source, copy, shallow=False), f"{copy} differs from {source}"


def _ld_size(text: str) -> int:
    units = {"K": 1024, "M": 1024 * 1024}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text, 0)


@pytest.mark.parametrize("name", BOARD_NAMES)
def test_bsp_matches_descriptor(name: str) -> None:
    """Linker regions, board.h and board.mk say the same as the ``QemuBoard``."""
    board = get_board(name)
    files = aidge_qemu_boards.assets_root_for(name) / "board_files"
    memory_ld = (files / "bsp" / "memory.ld").read_text()
    regions = {
        match[0]: (int(match[2], 16), _ld_size(match[3]), match[1])
        for match in re.findall(
            r"^\s*(\w+)\s*\((\w+)\)\s*:\s*ORIGIN\s*=\s*0x([0-9A-Fa-f]+),\s*LENGTH\s*=\s*(\w+)",
            memory_ld,
            re.MULTILINE,
        )
    }
    assert set(regions) == {region.name for region in board.memory_regions}
    for region in board.memory_regions:
        origin, size, attrs = regions[region.name]
        assert (origin, size) == (region.origin, region.size), region.name
        assert ("w" in attrs) == (region.kind is RegionKind.RAM), region.name

    board_h = (files / "bsp" / "board.h").read_text()
    assert re.search(rf"BOARD_CPU_HZ {board.cpu_hz}U", board_h)
    assert re.search(rf"BOARD_UART_BASE 0x{board.uart_base:08X}U", board_h)
    assert re.search(rf"BOARD_UART_HANDLE {board.uart_handle}\b", board_h)
    uart_macro = {"cmsdk_apb": "BOARD_UART_CMSDK", "stm32_usart": "BOARD_UART_STM32"}
    assert uart_macro[board.uart_kind.value] in board_h

    board_mk = (files / "board.mk").read_text()
    assert f"ELF_NAME := {board.elf_name}\n" in board_mk
    assert f"CPU_FLAGS := {' '.join(board.gcc_cpu_flags)}\n" in board_mk
    assert f"HAL_HEADER := {board.hal_board}xx_hal.h\n" in board_mk
    assert f"QEMU_MACHINE := {board.qemu_machine}\n" in board_mk
    assert f"ICOUNT_SHIFT := {board.icount_shift}\n" in board_mk


# --------------------------------------------------------------------------- QEMU runs

BuildFactory = Callable[..., BuiltExport]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("qemu_models")


@pytest.fixture(scope="module")
def tiny_model(model_dir: Path) -> Path:
    return modelzoo.tiny_cnn(model_dir / "tiny_cnn.onnx")


@pytest.fixture(scope="module")
def tiny_x() -> np.ndarray:
    return modelzoo.sample_input((1, 3, 4, 4))


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory, tiny_model: Path, tiny_x: np.ndarray
) -> Iterator[BuildFactory]:
    """``built(board, kind, dtype="float32", **app)`` -> BuiltExport, each built once."""
    cache: dict[tuple[Any, ...], BuiltExport] = {}
    root = tmp_path_factory.mktemp("qemu_exports")

    def factory(board: str, kind: str, dtype: str = "float32", **app: Any) -> BuiltExport:
        key = (board, kind, dtype, tuple(sorted(app.items())))
        if key not in cache:
            folder = root / f"{board}_{kind}_{dtype}_{len(cache)}"
            cache[key] = export_and_build(
                tiny_model, tiny_x, get_board(board), folder, dtype=dtype, kind=kind, **app
            )
        return cache[key]

    yield factory


BENCH = {"nb_warmup": 2, "nb_iterations": 5}


# standalone generates the same firmware as output: built on one board only.
OUTPUT_CASES = [(name, "output") for name in BOARD_NAMES] + [("mps2-an386", "standalone")]


@pytest.mark.parametrize(("name", "kind"), OUTPUT_CASES)
@pytest.mark.slow
@pytest.mark.qemu
@needs_qemu
def test_output_matches_onnxruntime(
    built: BuildFactory, tiny_model: Path, tiny_x: np.ndarray, name: str, kind: str
) -> None:
    project = built(name, kind)
    assert project.manifest["protocol"] == "aidge-uart-output/v1"
    assert project.manifest["target"] == name
    assert re.search(r"Memory region\s+Used Size\s+Region Size", project.build_log)
    code, raw = run_to_exit(project)
    assert code == 0, raw[-400:]
    assert_framed(raw)
    output = project.manifest["outputs"][0]
    values = parse_output_values(raw, output["name"])
    expected = modelzoo.onnx_reference(tiny_model, tiny_x).reshape(-1)
    assert values.shape == expected.shape == (output["size"],)
    # Printed with %f: six decimals.
    np.testing.assert_allclose(values, expected, rtol=1e-4, atol=2e-6)


@pytest.mark.parametrize("name", BOARD_NAMES)
@pytest.mark.slow
@pytest.mark.qemu
@needs_qemu
def test_benchmark_profiling_is_deterministic(built: BuildFactory, name: str) -> None:
    project = built(name, "benchmark", profiling=True, **BENCH)
    assert project.manifest["protocol"] == "aidge-uart-benchmark/v1"
    runs = [run_to_exit(project) for _ in range(2)]
    for code, raw in runs:
        assert code == 0, raw[-400:]
        assert_framed(raw)
    first, second = (raw for _, raw in runs)
    times = parse_number_line(first, "inference_time")
    cycles = parse_number_line(first, "cpu_cycles")
    layer_ms = parse_named_line(first, "layer_time_ms")
    layer_cycles = parse_named_line(first, "layer_cycles")
    assert len(times) == len(cycles) == BENCH["nb_iterations"]
    assert all(t > 0 for t in times), times
    # the boards' own entry (aidge_qemu_boards.entry): one forward per timed iteration
    entry = (project.path / "Src" / "inference_time.hpp").read_text()
    assert LINEAR_ENTRY_MARK in entry and "NB_MODEL_EXECUTIONS" not in entry
    assert len(layer_ms) == len(layer_cycles) >= 3
    assert set(layer_ms) == set(layer_cycles)
    # icount makes the SysTick-derived counts bit-identical from run to run.
    assert parse_number_line(second, "cpu_cycles") == cycles
    assert parse_named_line(second, "layer_cycles") == layer_cycles
    # Layers are measured inside the whole forward: their sum cannot exceed it.
    assert sum(layer_cycles.values()) <= max(cycles)
    board = get_board(name)
    instructions = ticks_to_instructions(board, cycles[0])
    assert 2_000 < instructions < 200_000, instructions
    # inference_time is each forward's cycles at cpu_hz, to the microsecond
    for ms, ticks in zip(times, cycles, strict=True):
        assert ms == pytest.approx(ticks / board.cpu_hz * 1e3, abs=1.001e-3)


@pytest.mark.parametrize("name", BOARD_NAMES)
@pytest.mark.slow
@pytest.mark.qemu
@needs_qemu
def test_benchmark_without_profiling(built: BuildFactory, name: str) -> None:
    project = built(name, "benchmark", profiling=False, **BENCH)
    code, raw = run_to_exit(project)
    assert code == 0, raw[-400:]
    assert_framed(raw)
    assert len(parse_number_line(raw, "inference_time")) == BENCH["nb_iterations"]
    # the boards' entry times each forward with the cycle counter, profiling or not; the
    # per-layer lines are the profiling build's
    assert len(parse_number_line(raw, "cpu_cycles")) == BENCH["nb_iterations"]
    assert b"layer_cycles:" not in raw


@pytest.fixture(scope="module")
def host_int8_output(
    tmp_path_factory: pytest.TempPathFactory, tiny_model: Path, tiny_x: np.ndarray
) -> np.ndarray:
    """tiny_cnn quantised and run by the host (CMake) export: the int8 reference."""
    folder = tmp_path_factory.mktemp("host_int8") / "export"
    project = export_project(tiny_model, tiny_x, "host", folder, dtype="int8", kind="output")
    for command in (
        ["cmake", "-B", "build", "-S", ".", "-DAIDGE_CMP=false"],
        ["cmake", "--build", "build", "-j2"],
    ):
        subprocess.run(
            command, cwd=project, check=True, capture_output=True, timeout=BUILD_TIMEOUT_S
        )
    result = subprocess.run(
        [str(project / "build" / "run_export")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return np.array([int(v) for v in result.stdout.split()])


@pytest.mark.parametrize("name", BOARD_NAMES)
@pytest.mark.slow
@pytest.mark.qemu
@needs_qemu
def test_int8_matches_host_int8_export(
    built: BuildFactory, host_int8_output: np.ndarray, name: str
) -> None:
    """The int8 kernels use the BSP's SXTB16/SMLAD intrinsics; the host export does not."""
    if shutil.which("cmake") is None or shutil.which("c++") is None:
        missing("cmake / c++ not installed: no host int8 reference")
    project = built(name, "output", dtype="int8")
    output = project.manifest["outputs"][0]
    assert output["dtype"] == "int8_t"
    code, raw = run_to_exit(project)
    assert code == 0, raw[-400:]
    assert_framed(raw)
    values = parse_output_values(raw, output["name"])
    assert values.tolist() == host_int8_output.tolist()


@pytest.mark.parametrize("name", BOARD_NAMES)
@pytest.mark.slow
@pytest.mark.qemu
@needs_qemu
def test_validation_session(built: BuildFactory, tiny_model: Path, name: str) -> None:
    project = built(name, "validation", profiling=True, nb_validation_iterations=2, **BENCH)
    assert project.manifest["protocol"] == "aidge-uart-validation/v1"
    samples = [modelzoo.sample_input((1, 3, 4, 4), seed=seed) for seed in (11, 12)]
    with QemuSession(project.board, project.elf, interactive=True) as session:
        drive_validation(session, samples)
        code = session.wait_exit()
        raw = session.raw
    assert code == 0, raw[-400:]
    assert_framed(raw)
    predictions = [int(v) for v in re.findall(rb"^prediction: (\d+)\n", raw, re.MULTILINE)]
    expected = [int(np.argmax(modelzoo.onnx_reference(tiny_model, s))) for s in samples]
    assert predictions == expected
    assert raw.index(b"VALIDATION_DONE\n") < raw.index(b"BENCHMARK_DONE\n")
    assert len(parse_number_line(raw, "cpu_cycles")) == BENCH["nb_iterations"]


@pytest.mark.parametrize("name", BOARD_NAMES)
@pytest.mark.slow
@pytest.mark.qemu
@needs_qemu
def test_tinyml_session(built: BuildFactory, tiny_model: Path, name: str) -> None:
    project = built(name, "benchmark", tinymlbenchmark=True, nb_warmup=1, nb_iterations=3)
    assert project.manifest["protocol"] == "mlperf-tiny-uart/v1"
    size = project.manifest["inputs"][0]["size"]
    payload = tinyml_payload(size)
    with QemuSession(project.board, project.elf, interactive=True) as session:
        drive_tinyml(session, payload)
        raw = session.raw
    assert b"m-name-dut-[Aidge_ARM_CortexM]\r\n" in raw
    assert f"m-[Expecting {size} bytes]\r\n".encode() in raw
    assert b"m-load-done\r\n" in raw
    laps = [int(v) for v in re.findall(rb"m-lap-us-(\d+)\r\n", raw)]
    assert len(laps) == 2 and laps[1] > laps[0], laps
    # The firmware casts each byte to float, in the exported NHWC order.
    x_nhwc = np.frombuffer(payload, np.uint8).astype(np.float32).reshape(1, 4, 4, 3)
    reference = softmax(
        modelzoo.onnx_reference(tiny_model, np.transpose(x_nhwc, (0, 3, 1, 2))).reshape(-1)
    )
    results = re.findall(rb"m-results-\[([^\]]*)\]\r\n", raw)
    assert len(results) == 2  # after infer, and for the results% command
    for line in results:
        values = np.array([float(v) for v in line.split(b",")])
        np.testing.assert_allclose(values, reference, atol=1.5e-3)


@pytest.mark.slow
@pytest.mark.qemu
@needs_qemu
def test_big_mlp_does_not_fit_netduinoplus2(tmp_path: Path) -> None:
    """~1.05 MB of float weights cannot link into the STM32F405's 1 MB of flash."""
    board = get_board("netduinoplus2")
    model = modelzoo.big_mlp(tmp_path / "big_mlp.onnx")
    project = export_project(
        model, modelzoo.sample_input((1, 1024)), board.name, tmp_path / "export", kind="output"
    )
    result = make_build(project)
    log = result.stdout + result.stderr
    assert result.returncode != 0
    overflow = re.search(r"region `FLASH' overflowed by (\d+) bytes", log)
    assert overflow, log[-2000:]
    weights = 4 * (1024 * 256 + 256 * 10)
    assert weights - board.flash_size < int(overflow.group(1)) < weights
    assert not list(project.glob(board.expected_artifact))
    # Activations are small; it is the constant data that does not fit.
    ram = re.search(r"^\s+RAM:\s+(\d+) B", log, re.MULTILINE)
    assert ram and int(ram.group(1)) < board.ram_size
