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
#: the layouts an implementation spec uses to mean "whatever its input has"
ANY_LAYOUTS = ("any", "any_1", "any_2", "any_3", "any_4", "any_5")


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


@contextlib.contextmanager
def layouts_from_parents() -> Iterator[bool]:
    """For the duration, a layout-agnostic node's output takes the layout its input really
    has. Yields whether the correction is installed. The caller holds the exporter's lock.

    Why: Aidge 0.10.1's ``adapt_graph.adapt_node`` gives a node whose chosen implementation
    accepts any layout (``dformat.any``: Quantizer, ReLU, Add...) the layout of its first
    input, read from the *original* graph's tensor (or, for a meta-operator, from the tensor
    inside its micro-graph). When the producer of that input is in the same candidate
    subgraph, only the candidate's clone of the producer was given its layout: the original
    tensor still carries the model's NCHW. The node is then labelled NCHW while its data is
    NHWC, and ``adapt_to_backend`` inserts Transposes from that wrong label, which scramble
    the activations. ResNet-8 int8 for the Arm Cortex-M export (``export_arm_cortexm``
    before ``export_cpp``, whose Quantizer is its own) is hit after its first residual Add:
    ``add_9`` NHWC -> Quantizer "NCHW" -> ReLU "NCHW" -> Transpose NCHW->NHWC -> Conv, which
    made it disagree with the float model (max abs error 0.17, 8 % top-1 agreement over 50
    inputs) while the host's export fuses Add, Quantizer and ReLU into one AddAct and is
    not hit. The correction takes the layout from the connected producer's output (the
    candidate's clone, or the adapted graph's node), which is what Aidge's own comment
    says it means ("use the first input dformat for the output"). Installed only over the
    functions it was written against.
    """
    import sys

    importlib.import_module("aidge_core.export_utils")
    # the package re-exports the function ``adapt_graph`` under the module's own name
    module: Any = sys.modules.get("aidge_core.export_utils.adapt_graph")
    adapt = getattr(module, "adapt_node", None)
    select = getattr(module, "select_best_impl", None)
    if (
        adapt is None
        or select is None
        or list(inspect.signature(adapt).parameters) != ["node", "export_libs"]
        or list(inspect.signature(select).parameters)
        != ["node", "export_libs", "compatible_impl_spec"]
    ):
        yield False
        return
    from aidge_core import dformat

    agnostic = {getattr(dformat, n) for n in ANY_LAYOUTS if hasattr(dformat, n)}
    concrete = {dformat.nchw, dformat.nhwc, dformat.ncw, dformat.nwc}
    chosen: list[Any] = []

    def recording_select(*args: Any, **kwargs: Any) -> Any:
        result = select(*args, **kwargs)
        chosen.append(result[0])
        return result

    def adapt_node(node: Any, export_libs: Any) -> None:
        chosen.clear()
        module.select_best_impl = recording_select
        try:
            adapt(node, export_libs)
        finally:
            module.select_best_impl = select
        if not chosen or not node.inputs():
            return
        parent, index = node.inputs()[0]
        if parent is None or parent.type() == "Producer":
            return  # the input comes from outside the candidate: Aidge's reading is right
        actual = parent.get_operator().get_output(index).dformat
        if actual not in concrete:
            return
        specs = chosen[-1].outputs
        for i, out in enumerate(node.get_operator().get_outputs()):
            if specs and specs[min(i, len(specs) - 1)].format in agnostic and out.dformat != actual:
                out.to_dformat(actual)

    module.adapt_node = adapt_node
    try:
        yield True
    finally:
        module.adapt_node = adapt


__all__ = ["ANY_LAYOUTS", "DENSE_ALIGNMENT", "dense_activation_rows", "layouts_from_parents"]
