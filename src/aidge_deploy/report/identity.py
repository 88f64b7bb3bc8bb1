"""What a result is *of*: the model, its tensors and the target, as comparable fingerprints.

Two bundles can only be compared when they measured the same model on the same target.
The full export hash is too strict for that (it changes with the iteration count or the
profiling switch, which rewrite ``main.cpp`` and ``forward.cpp``), so the model is
fingerprinted by what defines it: the layer configurations and parameters the exporter
wrote, plus the input/output tensor signature from the export manifest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from aidge_deploy.artifact import export_hash
from aidge_deploy.exportspec import Export

#: directory names under which the exporters write layer configs and weights
_MODEL_DIRS = frozenset({"layers", "parameters", "params", "weights"})
_SKIP_DIRS = frozenset({"build", "bin", "out", ".git", "__pycache__", "obj"})


class ModelHashBasis(StrEnum):
    LAYERS = "layers+parameters"  # layer configs and weights, plus the tensor signature
    EXPORT = "export"  # no recognisable layer/parameter files: the whole export hash


@dataclass(frozen=True)
class ModelIdentity:
    model_hash: str
    basis: ModelHashBasis
    io_signature: str
    export_hash: str

    def as_dict(self) -> dict[str, str]:
        return {
            "model_hash": self.model_hash,
            "model_hash_basis": self.basis.value,
            "io_signature": self.io_signature,
            "export_hash": self.export_hash,
        }


def _tensor_view(tensors: Sequence[Any]) -> list[dict[str, Any]]:
    return [
        {
            "name": str(t.get("name")),
            "dtype": str(t.get("dtype")),
            "dims": [int(d) for d in t.get("dims") or []],
        }
        for t in tensors
    ]


def io_signature(inputs: Sequence[Any], outputs: Sequence[Any]) -> str:
    """SHA-256 of the manifest's input and output tensors (name, dtype, dims)."""
    canon = json.dumps(
        {"inputs": _tensor_view(inputs), "outputs": _tensor_view(outputs)}, sort_keys=True
    )
    return hashlib.sha256(canon.encode()).hexdigest()


def _model_files(root: Path) -> list[Path]:
    files = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        parts = path.relative_to(root).parts
        if parts and parts[0] in _SKIP_DIRS:
            continue
        if any(part in _MODEL_DIRS for part in parts[:-1]):
            files.append(path)
    return files


def model_identity(artifact: Export) -> ModelIdentity:
    """Fingerprint the model of an export (see the module docstring for what is hashed)."""
    root = Path(artifact.path)
    manifest = artifact.manifest
    signature = io_signature(manifest.inputs, manifest.outputs)
    full = export_hash(artifact)
    files = _model_files(root)
    if not files:
        fallback = hashlib.sha256(f"{full}\0{signature}".encode()).hexdigest()
        return ModelIdentity(fallback, ModelHashBasis.EXPORT, signature, full)
    digest = hashlib.sha256()
    digest.update(signature.encode())
    for path in files:
        digest.update(b"\0" + str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes())
    return ModelIdentity(digest.hexdigest(), ModelHashBasis.LAYERS, signature, full)
