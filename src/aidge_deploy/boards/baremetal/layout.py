"""Put validation samples into the exported input layout before they are sent to a board.

Callers hand samples in the model's reference layout (NCHW / NCW, like the inputs given to
``export``); Cortex-M exports take NHWC / NWC (the manifest input ``dims``). The firmware
reads the numbers straight into its input buffer, so the order must be the exported one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from aidge_deploy.errors import ConfigError


def to_exported_layout(sample: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    """Return ``sample`` reordered (if needed) so that it matches ``dims``."""
    arr = np.asarray(sample)
    target = tuple(int(d) for d in dims)
    if arr.size != math.prod(target):
        raise ConfigError(
            f"A validation sample has {arr.size} values but the exported input has "
            f"{math.prod(target)} ({list(target)})",
            hint="Pass samples of the model's input shape in ValidationConfig.samples.",
        )
    if arr.shape == target:
        return arr
    if arr.ndim == 3 and len(target) == 4 and arr.shape == (target[3], target[1], target[2]):
        arr = arr[np.newaxis]
    if (
        arr.ndim == 4
        and len(target) == 4
        and arr.shape == (target[0], target[3], target[1], target[2])
    ):
        return np.transpose(arr, (0, 2, 3, 1))
    if arr.ndim == 3 and len(target) == 3 and arr.shape == (target[0], target[2], target[1]):
        return np.transpose(arr, (0, 2, 1))
    return arr.reshape(target)
