"""Many inputs through one build: the built program copied with its input array rewritten.

Why this module exists: an Aidge export bakes its sample into the program (the input
array, e.g. ``const float _0_Conv_0_input_0[1*6*6*1]``). Running N inputs used to mean N
exports and N builds, minutes for a few dozen samples. The array is a plain symbol of the
built ELF (the host's executable, a board's firmware), so each further input is the same
build with that symbol's bytes replaced: export once, build once, then for input ``i`` a
copy of the program in the run's own folder (the build cache is never touched) with
input ``i`` encoded as the export encodes its own sample (the exported layout; for int8,
``round(x * 127)`` as ``aidge_core.export_utils.quantize_inputs`` does), and run it.

Before any copy is trusted, the symbol's bytes in the built program are decoded and must
be input 0 as encoded here (the export's own sample): a wrong symbol, size, layout or
encoding is a ``ProgramPatchError`` with a hint, never silently wrong outputs. A program
that is not a local file (built on an SSH board, or a deploy that runs elsewhere) cannot be
patched; the caller then builds once per input and says so.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from aidge_deploy.errors import ProgramPatchError

#: the C types of an export's input array -> the NumPy type of its elements
_C_TYPES = {"float": np.float32, "float32_t": np.float32, "int8_t": np.int8, "int8": np.int8}
#: int8 exports scale their sample by 2**7 - 1 (aidge_core.export_utils.quantize_inputs)
_INT8_RESCALING = 127.0


class InputFeed(StrEnum):
    """How a target was given its inputs."""

    #: one export, one build; each further input a patched copy of the built program
    ONE_BUILD = "one-build"
    #: an export and a build per input (a program that cannot be patched, or asked for)
    PER_INPUT = "per-input"


@dataclass(frozen=True)
class InputSlot:
    """Where the export's input array is in its built program, and how it is encoded."""

    program: Path
    symbol: str
    file_offset: int
    size: int
    dims: tuple[int, ...]
    #: the element type, in the program's byte order
    dtype: np.dtype[Any]

    @property
    def quantised(self) -> bool:
        return self.dtype.kind == "i"


def encode_input(x: np.ndarray, dims: Sequence[int], dtype: np.dtype[Any]) -> bytes:
    """``x`` (the model's layout, float) as the export writes its sample: in the exported
    layout and, for int8, ``round(x * 127)`` (the values are checked to be in [-1, 1])."""
    from aidge_deploy.boards.baremetal.layout import to_exported_layout

    laid = np.ascontiguousarray(to_exported_layout(np.asarray(x, np.float32), dims)).reshape(-1)
    if dtype.kind == "i":
        return np.round(laid * _INT8_RESCALING).astype(int).astype(dtype).tobytes()
    return laid.astype(dtype).tobytes()


def locate_input(program: Path, manifest_input: Mapping[str, Any]) -> InputSlot:
    """The input array of ``program`` described by the export manifest's ``manifest_input``
    (its name, dims and C type): ``ProgramPatchError`` when the symbol is missing, has no
    bytes in the file, or is not the size of the input tensor in the export's type."""
    from aidge_deploy.elf import ElfReadError, symbol_extent

    name = str(manifest_input.get("name", ""))
    ctype = str(manifest_input.get("dtype", ""))
    dims = tuple(int(d) for d in manifest_input.get("dims", ()))
    hint = "validate builds once per input for this target instead (slower, same checks)."
    if ctype not in _C_TYPES:
        raise ProgramPatchError(
            f"the export's input {name!r} is of type {ctype!r}, which cannot be rewritten "
            f"(known: {', '.join(sorted(_C_TYPES))})",
            hint=hint,
        )
    try:
        extent = symbol_extent(program, name)
    except ElfReadError as exc:
        raise ProgramPatchError(
            f"{program} is not a readable ELF: {exc.reason}", hint=hint
        ) from exc
    if extent is None:
        raise ProgramPatchError(
            f"the input array {name!r} is not a symbol of {program.name}",
            hint="A stripped program or an export that names its input otherwise; " + hint,
        )
    dtype = np.dtype(_C_TYPES[ctype]).newbyteorder("<" if extent.little_endian else ">")
    want = math.prod(dims) * dtype.itemsize
    if extent.size != want:
        raise ProgramPatchError(
            f"the input array {name!r} of {program.name} is {extent.size} bytes; the export's "
            f"input {list(dims)} of {ctype} is {want} bytes",
            hint="The program was not built from this export, or the export was edited; " + hint,
        )
    if extent.file_offset is None:
        raise ProgramPatchError(
            f"the input array {name!r} is in {extent.section}, which has no bytes in "
            f"{program.name}",
            hint=hint,
        )
    return InputSlot(program, name, extent.file_offset, extent.size, dims, dtype)


def check_slot(slot: InputSlot, sample: np.ndarray) -> None:
    """``ProgramPatchError`` unless the slot's bytes in the built program are ``sample``
    (the export's own sample) as ``encode_input`` writes it: the proof that a copy patched
    with another input runs that input. Floats are compared to the export's printed
    precision (8 significant digits: within 1e-6 relative), int8 codes exactly."""
    with slot.program.open("rb") as handle:
        handle.seek(slot.file_offset)
        found = np.frombuffer(handle.read(slot.size), dtype=slot.dtype)
    want = np.frombuffer(encode_input(sample, slot.dims, slot.dtype), dtype=slot.dtype)
    same = (
        np.array_equal(found, want)
        if slot.quantised
        else found.shape == want.shape and np.allclose(found, want, rtol=1e-6, atol=1e-12)
    )
    if not same:
        raise ProgramPatchError(
            f"the input array {slot.symbol!r} of {slot.program.name} does not hold the "
            "export's sample as validate encodes it (layout or quantisation differ)",
            hint="validate builds once per input for this target instead (slower, same checks).",
        )


def write_patched(slot: InputSlot, x: np.ndarray, dest: Path) -> Path:
    """A copy of the built program at ``dest`` (mode kept: the host runs it) whose input
    array holds ``x``; the built program itself is untouched."""
    data = encode_input(x, slot.dims, slot.dtype)
    if len(data) != slot.size:  # pragma: no cover - checked by locate_input
        raise ProgramPatchError(f"input of {len(data)} bytes for a {slot.size}-byte array")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(slot.program, dest)
    with dest.open("r+b") as handle:
        handle.seek(slot.file_offset)
        handle.write(data)
    return dest


class KeepBuildStage:
    """After Build: keep the run's build and whether its program is a local file."""

    name = "KeepBuild"

    def __init__(self) -> None:
        self.build: Any = None
        #: why the program cannot be patched (None: it can)
        self.unpatchable: str | None = None

    def should_skip(self, ctx: Any) -> bool:
        return False

    def run(self, ctx: Any) -> None:
        from aidge_deploy.targetcaps import building_remotely

        target = ctx.resolved_target
        self.build = ctx.built
        if building_remotely(target) is not None:
            self.unpatchable = f"{ctx.resolved_target_name} builds on the remote machine"
        elif not Path(self.build.artifact_path).is_file():
            self.unpatchable = f"its program {self.build.artifact_path} is not a local file"


class PatchedBuildStage:
    """In place of Build: the kept build, its program replaced by a patched copy."""

    name = "Build"

    def __init__(self, build: Any, program: Path) -> None:
        self._build = build
        self._program = program

    def should_skip(self, ctx: Any) -> bool:
        return False

    def run(self, ctx: Any) -> None:
        from aidge_deploy.progress import ProgressKind

        ctx.build_result = dataclasses.replace(self._build, artifact_path=self._program)
        ctx.report(self.name, ProgressKind.STATUS, "the built program, its input rewritten")


def pipeline_keeping(stage: KeepBuildStage) -> list[Any]:
    """The default pipeline with ``stage`` right after Build."""
    from aidge_deploy.pipeline.default import build_default_pipeline

    stages = build_default_pipeline().stages
    at = next(i for i, s in enumerate(stages) if s.name == "Build")
    return [*stages[: at + 1], stage, *stages[at + 1 :]]


def pipeline_patched(build: Any, program: Path) -> list[Any]:
    """The default pipeline with Build replaced by the patched copy ``program`` of ``build``."""
    from aidge_deploy.pipeline.default import build_default_pipeline

    return [
        PatchedBuildStage(build, program) if s.name == "Build" else s
        for s in build_default_pipeline().stages
    ]


def outputs_through_one_build(
    artifact: Any,
    config: Any,
    sample: np.ndarray,
    inputs: Sequence[np.ndarray],
    work_root: Path,
    *,
    progress: Any = None,
) -> tuple[list[list[np.ndarray]], Any]:
    """The outputs of ``artifact`` (an output export whose own sample is ``sample``) on each
    of ``inputs``: one deploy of the export as it is (its build, checked against
    ``sample``), then one patched copy per input. Returns the outputs per input and the
    last run's ``DeployResult`` (provenance, quantisation); ``ProgramPatchError`` when the
    program cannot be patched."""
    from aidge_deploy.api import deploy

    def outputs_of(result: Any) -> list[np.ndarray]:
        if not isinstance(result.output, list):
            raise ProgramPatchError(
                f"{artifact.manifest.target}: the run printed no output tensors",
                hint="Score accuracy with an output export (application kind 'output').",
            )
        return [np.asarray(o) for o in result.output]

    kept = KeepBuildStage()
    result = deploy(
        artifact, config, work_dir=work_root / "build", pipeline=pipeline_keeping(kept),
        progress=progress,
    )  # fmt: skip
    outputs_of(result)
    if kept.unpatchable is not None:
        raise ProgramPatchError(
            f"the program cannot be rewritten: {kept.unpatchable}",
            hint="Outputs of several inputs need a program built on this machine.",
        )
    slot = locate_input(kept.build.artifact_path, artifact.manifest.inputs[0])
    check_slot(slot, sample)
    out = []
    for i, x in enumerate(inputs):
        work_dir = work_root / f"input-{i}"
        program = write_patched(slot, x, work_dir / "program" / kept.build.artifact_path.name)
        result = deploy(
            artifact, config, work_dir=work_dir,
            pipeline=pipeline_patched(kept.build, program), progress=progress,
        )  # fmt: skip
        out.append(outputs_of(result))
    return out, result


__all__ = [
    "InputFeed",
    "InputSlot",
    "KeepBuildStage",
    "PatchedBuildStage",
    "check_slot",
    "encode_input",
    "locate_input",
    "outputs_through_one_build",
    "pipeline_keeping",
    "pipeline_patched",
    "write_patched",
]
