"""``deploy()`` of a built export on an emulated mps2-an386 against the bare QEMU baseline.

Bare baseline: ``qemu-system-arm -kernel <elf>`` of the same ELF (same icount), UART on
stdio read until the end keyword. deploy(): the export is already built (warm cache), so
the figure is the cost of our mechanics: QEMU started halted, RSP flash + verify, UART over
TCP, parsing. Target: <= 1.3x. Run: ``python benchmarks/bench_qemu_deploy.py [repeats]``.

Where the time above bare went (cProfile of 10 warm deploys, then timed stages): parsing
the firmware's whole symbol table with pyelftools to find a vector table that has a section
of its own (~15 ms a deploy), hashing the export twice per build with ``pathlib`` walks
(~15 ms), and a second RSP handshake after the start-up probe (~1-2 ms). What is left is
QEMU's own start, the RSP write + read-back verify of the image, and the UART over TCP.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aidge_deploy
from aidge_qemu_boards.boards import get_board, qemu_command
from common import make_export, median_of, report, timed


def bare(elf: Path, end: bytes = b"END DEMO") -> None:
    board = get_board("mps2-an386")
    cmd = qemu_command(board, elf, serial="stdio")
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
    proc.wait(5)
    if end not in seen:
        raise RuntimeError("bare QEMU run did not reach the end keyword")


def main(repeats: int = 10) -> None:
    with tempfile.TemporaryDirectory() as tmp_name:
        artifact = make_export(Path(tmp_name), target="mps2-an386", nb_iterations=5)
        first = aidge_deploy.deploy(artifact, aidge_deploy.DeployConfig())  # builds once
        assert first.build is not None
        elf = first.build.artifact_path
        bare_s, deploy_s = [], []
        for i in range(repeats):
            if i % 2:
                bare_s.append(timed(lambda: bare(elf)))
            deploy_s.append(
                timed(lambda: aidge_deploy.deploy(artifact, aidge_deploy.DeployConfig()))
            )
            if not i % 2:
                bare_s.append(timed(lambda: bare(elf)))
        b, d = median_of(bare_s), median_of(deploy_s)
        report(
            f"mps2-an386 deploy of a built export, median of {repeats}",
            [("bare qemu -kernel to END", b), ("deploy() (flash over RSP)", d)],
            [("deploy / bare", d / b, 1.3)],
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
