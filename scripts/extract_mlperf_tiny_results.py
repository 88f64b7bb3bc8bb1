#!/usr/bin/env python3
"""Extract the published MLPerf Tiny closed-division Cortex-M rows into the package's data.

Reads git snapshots of the ``mlcommons/tiny_results_v1.0`` ... ``v1.3`` repositories (one
bare or non-bare git directory per version, given on the command line as VERSION=GITDIR)
and writes ``src/aidge_deploy/mlperf/data/published.json``: one row per (system, benchmark)
whose processor is an Arm Cortex-M core and that has no accelerator, with the board, core,
clock, inference engine and its version, the median throughput the submission's
``performance/results.txt`` states (``Median throughput is N inf./sec.``), and the path of
both files it was read from, at the snapshot's commit. Nothing is estimated or filled in:
a row whose clock or throughput cannot be read is left out and said on stderr.

    python scripts/extract_mlperf_tiny_results.py 1.0=/path/to/tiny_results_v1.0/.git ...
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src/aidge_deploy/mlperf/data/published.json"
BENCHMARKS = ("kws", "ic", "vww", "ad")
_CORE = re.compile(r"Cortex\W{0,3}\s*-?\s*(M\d+)", re.I)
_MHZ = re.compile(r"(\d+(?:\.\d+)?)\s*MHz", re.I)
_MEDIAN = re.compile(r"Median throughput is\s+([\d.]+)\s+inf\./sec\.")
_VERSION = re.compile(r"\bv?(\d+(?:\.\d+)+)\b")
_NONE = {"", "n/a", "na", "none", "-"}


def git(gitdir: str, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={gitdir}", *args], capture_output=True, text=True, check=True
    ).stdout


def first_non_empty(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """System descriptions repeat keys (an empty second "Inference Framework"): keep the
    first non-empty value of each key."""
    out: dict[str, object] = {}
    for key, value in pairs:
        key = key.strip()
        if key not in out or (str(out[key]).strip() == "" and str(value).strip() != ""):
            out[key] = value
    return out


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def system_file(systems: list[str], submitter: str, system: str) -> str | None:
    """The system description of a results folder: same name (ignoring case and
    punctuation), else a file in a folder of that name, else a name that starts with it."""
    mine = [p for p in systems if p.split("/")[1] == submitter]
    key = _norm(system)
    for match in (
        lambda p: _norm(Path(p).stem) == key,
        lambda p: _norm(Path(p).parent.name) == key,
        lambda p: _norm(Path(p).stem).startswith(key),
    ):
        found = [p for p in mine if match(p)]
        if len(found) == 1:
            return found[0]
    return None


def dtype_of(system: str, quantisation: str) -> str | None:
    """int8 or float32 as the submission says it (its system name or quantisation method);
    None when it says neither."""
    said = f"{system} {quantisation}".lower()
    if "float" in said or "fp32" in said:
        return "float32"
    if "int8" in said or "8-bit" in said or "8 bit" in said:
        return "int8"
    return None


def engine_of(system: dict[str, object]) -> tuple[str, str | None]:
    """The inference engine and its version, as the submission names them."""
    for key in ("Inference Framework", "ML Model Compiler(s)", "Software Libraries"):
        text = str(system.get(key, "")).strip()
        if text.lower() not in _NONE:
            version = _VERSION.search(text)
            name = text[: version.start()] if version else text
            name = re.sub(r"\s+version\s*$", "", name, flags=re.I).strip(" ,-(")
            return (name or text), (version.group(1) if version else None)
    return "unnamed", None


def rows_of(version: str, gitdir: str) -> list[dict[str, object]]:
    commit = git(gitdir, "rev-parse", "HEAD").strip()
    files = git(gitdir, "ls-tree", "-r", "--name-only", "HEAD").splitlines()
    systems = [
        f for f in files if f.startswith("closed/") and "/systems/" in f and f.endswith(".json")
    ]
    rows = []
    for path in files:
        parts = path.split("/")
        if not (
            len(parts) == 7
            and parts[0] == "closed"
            and parts[2] == "results"
            and parts[4] in BENCHMARKS
            and parts[5] == "performance"
            and parts[6] == "results.txt"
        ):
            continue
        submitter, system_name, benchmark = parts[1], parts[3], parts[4]
        system_path = system_file(systems, submitter, system_name)
        if system_path is None:
            print(f"v{version} {path}: no system description", file=sys.stderr)
            continue
        try:
            system = json.loads(
                git(gitdir, "show", f"HEAD:{system_path}"), object_pairs_hook=first_non_empty
            )
        except ValueError as exc:
            print(f"v{version} {system_path}: not JSON ({exc}), left out", file=sys.stderr)
            continue
        processor = str(system.get("Processor(s) Name", ""))
        core = _CORE.search(processor)
        accelerator = str(system.get("Accelerator", "")).strip().lower()
        if core is None or accelerator not in _NONE:
            continue
        clock = _MHZ.search(str(system.get("Processor(s) Frequencies", "")))
        median = _MEDIAN.search(git(gitdir, "show", f"HEAD:{path}"))
        if clock is None or median is None:
            print(f"v{version} {path}: no clock or median throughput, left out", file=sys.stderr)
            continue
        engine, engine_version = engine_of(system)
        quantisation = str(system.get("Quantization Method", "")).strip()
        throughput = float(median.group(1))
        rows.append(
            {
                "round": f"v{version}",
                "division": "closed",
                "submitter": submitter,
                "system": system_name,
                "board": str(system.get("Board Name", "")).strip() or system_name,
                "processor": processor.strip(),
                "core": f"cortex-{core.group(1).lower()}",
                "clock_hz": float(clock.group(1)) * 1e6,
                "engine": engine,
                "engine_version": engine_version,
                "benchmark": benchmark,
                "quantization_method": quantisation or None,
                "dtype": dtype_of(system_name, quantisation),
                "median_throughput_per_s": throughput,
                "latency_s": 1.0 / throughput,
                "source": {
                    "repository": f"mlcommons/tiny_results_v{version}",
                    "commit": commit,
                    "result": path,
                    "system": system_path,
                },
            }
        )
    return rows


def main(argv: list[str]) -> int:
    rows = []
    for arg in argv:
        version, _, gitdir = arg.partition("=")
        rows.extend(rows_of(version, gitdir))
    rows.sort(key=lambda r: (r["core"], r["benchmark"], r["round"], r["board"], r["system"]))
    doc = {
        "schema": "aidge-deploy/mlperf-tiny-published",
        "schema_version": 1,
        "note": "MLPerf Tiny closed-division results of Arm Cortex-M systems without an "
        "accelerator, as published; latency = 1 / the median throughput of the "
        "submission's performance run.",
        "rows": rows,
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"{len(rows)} rows -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
