"""Record the UART logs in this folder from real QEMU runs (see README.md).

Run from the repository root with the dev venv active::

    python tests/data/logs/qemu/capture_logs.py [--out tests/data/logs/qemu]

For every emulated board it exports ``modelzoo.tiny_cnn`` with the real Aidge exporter,
builds it with ``make build``, runs it in ``qemu-system-arm`` (icount, semihosting) and
writes the bytes the firmware sent, unmodified, to ``<board>_<kind>[_<dtype>].log``, the
export's manifest next to it (``<stem>.aidge-export.json``, parsers need it), and what the
host sent or expected in ``captures.json``. It reuses the helpers of
``tests/test_qemu_boards.py`` so the logs come from exactly what the tests run.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

TESTS = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(TESTS))

import modelzoo  # noqa: E402
import test_qemu_boards as qb  # noqa: E402
from aidge_qemu_boards import list_boards  # noqa: E402

# The linker's --print-memory-usage rows, e.g. "FLASH:  27476 B  4 MB  0.66%".
MEMORY_LINE = re.compile(r"^\s*(\w+:\s+\d+ [KMG]?B\s+\d+ [KMG]?B\s+[\d.]+%)", re.MULTILINE)
BENCH = {"nb_warmup": 2, "nb_iterations": 5}
VALIDATION_SEEDS = (11, 12)


def qemu_version() -> str:
    result = subprocess.run(
        ["qemu-system-arm", "--version"], capture_output=True, text=True, check=True, timeout=30
    )
    return result.stdout.splitlines()[0]


def capture(
    out: Path, work: Path, model: Path, x: np.ndarray, board_name: str, stem: str, **app: Any
) -> dict[str, Any]:
    """Export, build, run (driving the interactive protocols) and save one log."""
    board = qb.get_board(board_name)
    built = qb.export_and_build(model, x, board, work / stem, **app)
    record: dict[str, Any] = {
        "board": board.name,
        "protocol": built.manifest["protocol"],
        "dtype": app.get("dtype", "float32"),
        "qemu_argv": [*qb.qemu_command(board, Path(board.expected_artifact))],
        "icount_shift": board.icount_shift,
        "cpu_hz": board.cpu_hz,
    }
    protocol = built.manifest["protocol"]
    if protocol == "aidge-uart-validation/v1":
        samples = [modelzoo.sample_input((1, 3, 4, 4), seed=seed) for seed in VALIDATION_SEEDS]
        with qb.QemuSession(board, built.elf, interactive=True) as session:
            sent = qb.drive_validation(session, samples)
            record["exit_code"] = session.wait_exit()
            raw = session.raw
        record["host_sent_lines"] = [line.decode() for line in sent]
        record["expected_predictions"] = [
            int(np.argmax(modelzoo.onnx_reference(model, s))) for s in samples
        ]
    elif protocol == "mlperf-tiny-uart/v1":
        size = built.manifest["inputs"][0]["size"]
        payload = qb.tinyml_payload(size)
        with qb.QemuSession(board, built.elf, interactive=True) as session:
            commands = qb.drive_tinyml(session, payload)
            raw = session.raw
        record["exit_code"] = None  # never exits: killed after the results% reply
        record["payload_hex"] = payload.hex()
        record["host_sent_commands"] = [command.decode() for command in commands]
    else:
        record["exit_code"], raw = qb.run_to_exit(built)
        if protocol == "aidge-uart-output/v1" and record["dtype"] == "float32":
            record["expected_output"] = [
                float(v) for v in modelzoo.onnx_reference(model, x).reshape(-1)
            ]
    (out / f"{stem}.log").write_bytes(raw)
    shutil.copyfile(built.path / ".aidge-export.json", out / f"{stem}.aidge-export.json")
    record["memory_usage"] = MEMORY_LINE.findall(built.build_log)
    return record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    x = modelzoo.sample_input((1, 3, 4, 4))
    records: dict[str, Any] = {"qemu": qemu_version(), "model": "modelzoo.tiny_cnn(seed=0)"}
    with tempfile.TemporaryDirectory(prefix="qemu_logs_") as tmp:
        work = Path(tmp)
        model = modelzoo.tiny_cnn(work / "tiny_cnn.onnx")
        for board in list_boards():
            jobs: list[tuple[str, dict[str, Any]]] = [
                (f"{board.name}_output", {"kind": "output"}),
                (f"{board.name}_output_int8", {"kind": "output", "dtype": "int8"}),
                (f"{board.name}_benchmark", {"kind": "benchmark", "profiling": True, **BENCH}),
                (
                    f"{board.name}_validation",
                    {
                        "kind": "validation",
                        "profiling": True,
                        "nb_validation_iterations": len(VALIDATION_SEEDS),
                        **BENCH,
                    },
                ),
                (
                    f"{board.name}_tinyml",
                    {
                        "kind": "benchmark",
                        "tinymlbenchmark": True,
                        "nb_warmup": 1,
                        "nb_iterations": 3,
                    },
                ),
            ]
            if board.name == "mps2-an386":
                jobs.append(
                    (
                        f"{board.name}_benchmark-noprofiling",
                        {"kind": "benchmark", "profiling": False, **BENCH},
                    )
                )
            for stem, app in jobs:
                records[stem] = capture(out, work, model, x, board.name, stem, **app)
                print(f"captured {stem}.log")  # a script, not the library: progress on stdout
    (out / "captures.json").write_text(json.dumps(records, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
