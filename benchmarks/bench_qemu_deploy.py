"""``deploy()`` of a built export on an emulated mps2-an386 against the bare QEMU baseline.

Bare baseline: ``qemu-system-arm -kernel <elf>`` of the same ELF (same icount), UART on
stdio read until the end keyword. deploy(): the export is already built (warm cache), so
the figure is the cost of our mechanics: QEMU started halted, RSP flash + verify, UART over
TCP, parsing. Target: <= 1.3x. Run: ``python benchmarks/bench_qemu_deploy.py [repeats]``.

A deploy of a benchmark export on an emulated board also runs the core's timing model (the
aidge_pmu plugin pricing each instruction: issue 19), which a bare ``-kernel`` run does not;
so three ratios are printed: ``--timing cpi1`` (no plugin: the mechanics alone) against bare,
the default deploy (model) against the bare run with the same plugin and arguments (the
mechanics, the plugin's cost being on both sides), and the default deploy against plain bare
(what a user sees, mechanics and model: the figure the 1.3x target is for).

Where the time above bare went (cProfile of 10 warm deploys, then timed stages): parsing
the firmware's whole symbol table with pyelftools to find a vector table that has a section
of its own (~15 ms a deploy), hashing the export twice per build with ``pathlib`` walks
(~15 ms), and a second RSP handshake after the start-up probe (~1-2 ms). Then, with the
timing model: a warm QEMU run spends nearly all its CPU starting and *translating* (the
guest code itself runs in well under 1 ms), and the plugin made QEMU translate two inline
adds per guest instruction; it adds per translation block now (QEMU CPU above bare 7.6 ->
4.9 ms; ~3 ms of what is left is QEMU 7.2's own instrumentation, paid by any plugin that
sees translations). The UART was read one byte per call (pyserial's socket ``in_waiting``
says 0 or 1: ~600 reads a run, ~3 ms of CPU beside the emulator); it takes what the socket
holds now. Flashing and verifying took one RSP round trip per 2 KB packet (~30), each
waiting for both processes to be scheduled; the memory packets are pipelined to QEMU's stub
now (two round trips).

Where the rest went, and what was done (perf and cProfile of warm deploys): QEMU's own
start is ~33 ms of CPU on this machine before any guest code, the same for bare and deploy:
~23 ms is the process start itself (the dynamic loader's ~245,000 relocations over ~50
libraries, the kernel zeroing huge pages) and the rest machine set-up. The deploy ran its
Python (Preflight, the build-cache check, the timing plan: ~4-6 ms) *before* that start;
Prepare now launches the board's QEMU halted, so the two overlap, and the timing plugin
reads its snapshot addresses from a file written at flash time (they need the firmware).
The overlap gains less than it costs serially: this machine's two vCPUs slow each other
when both are busy (a QEMU start takes 39 ms alone, 64 ms beside a spinning process), so
less work, not only overlapped work, was needed too: the RSP handshake sends ``?`` with
``target.xml`` and a document's includes together (two round trips instead of five), the
escaping no longer loops over bytes in Python, the plugin makes one allocation per
translated block instead of five, and facts derived from unchanged files (the export's
hash, the layer analysis, the firmware's symbols, the built plugin, the compiler's path)
are kept for the process, re-validated by one stat each. The end of a run waited for QEMU
to close the UART, which it does only after the kernel has freed its memory (~3-5 ms after
the semihosting exit); the debugger now stays attached while the firmware runs, QEMU's stub
announces the exit status (``W00``) before QEMU exits, the UART's last bytes are already
received, and parsing overlaps the teardown. What remains above bare (a warm deploy's
timeline on 2 December, bare run 63-80 ms): the plugin (QEMU CPU +6-9 ms; an empty plugin
that only sees translations already costs ~3 ms of QEMU's own instrumentation), the RSP
flash + verify (~4.5 ms: QEMU 7.2's stub takes no binary ``X`` writes, so 29 KB go as
58 KB of hex, parsed by the stub a byte at a time, read back in 0.8 ms), ``setpriv``'s
extra exec for the parent-death signal (~1.3 ms), the Python before QEMU starts (~3.8 ms,
the deploy's set-up and Preflight), the UART over TCP (~1 ms of QEMU CPU against a pipe),
parsing and assembling (~4 ms, now during QEMU's teardown) and QEMU's teardown itself,
which a bare run that kills QEMU at the end keyword also pays.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aidge_deploy
from aidge_deploy.boards.baremetal.qemu.estimate import model_plugin_options
from aidge_deploy.boards.baremetal.qemu.pmu import PmuSymbols
from aidge_deploy.connections.local_process import wait_process
from aidge_deploy.profiling.qemu_plugin import plugin_option, plugin_path
from aidge_deploy.profiling.timing import TimingMode
from aidge_qemu_boards.boards import get_board, qemu_command
from common import make_export, median_of, report, timed


def model_args(elf: Path, trace: Path) -> tuple[str, ...]:
    """The plugin arguments a default deploy gives QEMU (timing model, no memory counters)."""
    board = get_board("mps2-an386")
    options = model_plugin_options(board, TimingMode.MODEL)
    args = plugin_option(
        plugin_path(), PmuSymbols.of(elf).boundaries, trace, count_memory=False, **options
    )
    return tuple(args)


def bare(elf: Path, end: bytes = b"END DEMO", extra: tuple[str, ...] = ()) -> None:
    board = get_board("mps2-an386")
    cmd = qemu_command(board, elf, serial="stdio", extra_args=extra)
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
    )
    assert proc.stdout is not None
    seen = b""
    deadline = time.monotonic() + 60
    while end not in seen and time.monotonic() < deadline:
        chunk = proc.stdout.read1(4096)
        if not chunk:
            break
        seen += chunk
    proc.terminate()
    # reaped the moment it exits, as deploy() does (Popen.wait(timeout) polls: up to ~2 ms late)
    if wait_process(proc, 5) is None:
        proc.kill()
        proc.wait()
    if end not in seen:
        raise RuntimeError("bare QEMU run did not reach the end keyword")


def main(repeats: int = 10) -> None:
    with tempfile.TemporaryDirectory() as tmp_name:
        artifact = make_export(Path(tmp_name), target="mps2-an386", nb_iterations=5)
        first = aidge_deploy.deploy(artifact, aidge_deploy.DeployConfig())  # builds once
        assert first.build is not None
        assert first.metrics.get("estimated_cycles"), "the timing model did not run"
        elf = first.build.artifact_path
        plugged = model_args(elf, Path(tmp_name) / "bare.trace")
        runs = {
            "bare": lambda: bare(elf),
            "bare+model": lambda: bare(elf, extra=plugged),
            "cpi1": lambda: aidge_deploy.deploy(artifact, aidge_deploy.DeployConfig(timing="cpi1")),
            "model": lambda: aidge_deploy.deploy(artifact, aidge_deploy.DeployConfig()),
        }
        samples: dict[str, list[float]] = {name: [] for name in runs}
        for i in range(repeats):  # interleaved, in a rotating order (the machine's load drifts)
            names = list(runs)
            for name in names[i % 4 :] + names[: i % 4]:
                samples[name].append(timed(runs[name]))
        m = {name: median_of(s) for name, s in samples.items()}
        report(
            f"mps2-an386 deploy of a built export, median of {repeats}",
            [
                ("bare qemu -kernel to END", m["bare"]),
                ("bare + timing-model plugin", m["bare+model"]),
                ("deploy() --timing cpi1", m["cpi1"]),
                ("deploy() (timing model)", m["model"]),
            ],
            [
                ("cpi1 deploy / bare", m["cpi1"] / m["bare"], 1.3),
                ("model deploy / bare+model", m["model"] / m["bare+model"], 1.3),
                ("model deploy / bare", m["model"] / m["bare"], 1.3),
            ],
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
