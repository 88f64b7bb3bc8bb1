"""A correction to Aidge 0.10.1's int8 exports, applied while aidge-deploy exports a model.

Why this module exists: ``aidge_core.export_utils.export.write_export`` plans an int8
export's activation memory with ``memory_alignment=16`` ("int8 kernels need 16-byte"). The
planner applies it to each memory row — in NHWC, one pixel's channels — so a 4-channel
int8 activation gets a 16-byte stride. Convolution and pooling kernels follow the planned
stride, but the Transpose, Reshape and FullyConnected kernels, and the outputs a program
prints, read the buffer densely: after any int8 layer whose channel count is not a multiple
of 16 the next layer reads padding. The outputs are wrong on the host and on every board
alike (a 4-channel convolution's pixel ``p`` lands at byte ``16 p``), which is what made
the int8 accuracy of the campaign tests' small CNNs 16.7 % (1 of 6 samples: chance), while
Aidge's own CPU inference of the same quantised graph agrees with the float model. Models
whose channel counts are multiples of 16 (DS-CNN: 64, ResNet-8: 16/32/64) were not hit;
MobileNetV1-0.25's 8-channel layers are.

``dense_activation_rows`` plans rows densely (alignment 1, what float32 exports use), which
every kernel reads correctly; the kernels take no alignment from the planner, so nothing
else changes. Installed only over the function it was written against (a keyword
``memory_alignment``); another Aidge plans its own way.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
from collections.abc import Iterator
from typing import Any

#: the alignment int8 activation rows are planned with (Aidge 0.10.1 asks for 16)
DENSE_ALIGNMENT = 1


@contextlib.contextmanager
def dense_activation_rows() -> Iterator[bool]:
    """For the duration, the exporter plans activation rows densely. Yields whether the
    correction is installed. The caller holds the exporter's lock (``modelexport``)."""
    module: Any = importlib.import_module("aidge_core.export_utils.export")
    original = getattr(module, "generate_optimized_memory_info", None)
    if original is None or "memory_alignment" not in inspect.signature(original).parameters:
        yield False
        return

    def planned(scheduler: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs["memory_alignment"] = DENSE_ALIGNMENT
        return original(scheduler, *args, **kwargs)

    module.generate_optimized_memory_info = planned
    try:
        yield True
    finally:
        module.generate_optimized_memory_info = original


__all__ = ["DENSE_ALIGNMENT", "dense_activation_rows"]
