"""Write the small CNN the README's demo profiles (Conv+ReLU+Gemm on a 1x3x4x4 input)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import modelzoo  # noqa: E402

if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tiny_cnn.onnx")
    modelzoo.tiny_cnn(out)
    print(f"wrote {out}")
