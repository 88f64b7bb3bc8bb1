#!/usr/bin/env python3
"""Convert the MLPerf Tiny trained models (TFLite) to ONNX, checked against the TFLite
interpreter; needs `pip install 'aidge-deploy[tflite]'`.

    # the four reference models (float, and int8 where published) of a snapshot of
    # mlcommons/tiny (a checkout of that repository: benchmark/training/*/trained_models)
    python scripts/convert_mlperf_tiny.py --tiny path/to/tiny --out models/
    # one file
    python scripts/convert_mlperf_tiny.py model.tflite model.onnx

Float models become float ONNX models (int8 weights dequantised: the KWS reference's);
int8 models stay quantised (QuantizeLinear/DequantizeLinear). Inputs are NCHW, batch 1.
Each line says the largest |ONNX - TFLite| over 20 random inputs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aidge_deploy.errors import DeployError
from aidge_deploy.mlperf.convert import convert_tflite
from aidge_deploy.mlperf.models import MODELS


def jobs(args: argparse.Namespace) -> list[tuple[Path, Path]]:
    if args.tiny is None:
        if len(args.files) != 2:
            raise SystemExit("give TFLITE ONNX, or --tiny DIR --out DIR")
        return [(Path(args.files[0]), Path(args.files[1]))]
    root, out = Path(args.tiny), Path(args.out or "models")
    pairs = []
    for spec in MODELS.values():
        pairs.append((root / spec.float_tflite, out / f"{spec.name.value}_float32.onnx"))
        if spec.int8_tflite:
            pairs.append((root / spec.int8_tflite, out / f"{spec.name.value}_int8.onnx"))
    return pairs


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="TFLITE ONNX (one file)")
    parser.add_argument("--tiny", help="a checkout of mlcommons/tiny")
    parser.add_argument("--out", help="where the ONNX files go (with --tiny)")
    args = parser.parse_args(argv)
    status = 0
    for tflite, onnx in jobs(args):
        try:
            done = convert_tflite(tflite, onnx)
        except DeployError as exc:
            print(f"{tflite}: {exc}", file=sys.stderr)
            status = 2
            continue
        print(
            f"{tflite.name} -> {onnx} ({'float, weights dequantised' if done.dequantised else 'int8, quantised'}"
            f"; input {'x'.join(map(str, done.input_shape))} {done.input_dtype}): "
            f"max |ONNX - TFLite| = {done.max_abs_difference:.3g} over {done.checked_inputs} inputs"
        )
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
