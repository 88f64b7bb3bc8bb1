"""Whether a model's weights can fit a board at all, said before anything is exported.

Why this module exists: a model whose weights exceed a board's flash fails at the link,
after a full export and build (a minute for an MLPerf Tiny model), with a linker's
"region FLASH overflowed". The weights alone bound what the image needs: every parameter
is stored once, as float32 (4 B) in a float32 export and at least 1 B in an int8 one.
``check_model_fits`` compares that lower bound with the flash of the target's hardware
model and refuses, naming the memory, the need and the size; a model that passes can
still overflow at the link (code, activations in RAM), which the build-time check says.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from aidge_deploy.errors import MemoryFitError

if TYPE_CHECKING:
    from aidge_deploy.profiling.binary import MemoryCapacity

#: bytes per stored parameter, at least, by export dtype
BYTES_PER_PARAMETER = {"float32": 4, "int8": 1}


def check_model_fits(
    model: Path, dtype: str, target: str, capacities: Sequence[MemoryCapacity]
) -> None:
    """Raise ``MemoryFitError`` when ``model``'s parameters alone exceed the target's flash."""
    flash = [c for c in capacities if c.role == "flash"]
    per = BYTES_PER_PARAMETER.get(dtype)
    if not flash or per is None:
        return
    from aidge_deploy.mlperf.models import count_onnx

    params = count_onnx(model).params
    need = params * per
    size = sum(c.capacity for c in flash)
    if need <= size:
        return
    names = ", ".join(c.name for c in flash)
    raise MemoryFitError(
        f"{model.name} does not fit {target}: its {params:,} parameters need at least "
        f"{need:,} B of flash as {dtype} ({per} B each), the flash of {target} ({names}) "
        f"is {size:,} B — would overflow by {need - size:,} B",
        hint="Export it as int8 (--dtype int8: 1 B per weight), or choose a board with more "
        "flash (`aidge-deploy targets` lists their memories).",
        stage="preflight",
    )


__all__ = ["BYTES_PER_PARAMETER", "check_model_fits"]
