"""What ``validate`` is asked to do, checked before anything is exported.

Why this module exists: a validation exports and runs a model on several targets, which
takes minutes; a typo in a target, a missing inputs folder, a garbage ``.npy``, a report
folder that cannot be written or a ``nan`` timeout must cost nothing. ``check_validation``
reads and checks every input of the command and returns a ``ValidationRequest`` the runner
trusts; each problem is a ``ConfigError``/``ReportError`` with a hint (exit 2).
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aidge_deploy.errors import ConfigError, ReportError
from aidge_deploy.validation.feed import InputFeed

#: the report folder's own files (a folder holding them is an earlier validation report)
REPORT_FILES = ("validation.json", "validation.html")


@dataclass(frozen=True)
class ValidationRequest:
    """A checked validation: every value usable as it is."""

    model: Path
    targets: tuple[str, ...]
    dtype: str
    #: the samples every target runs (reference layout); one random sample by default
    inputs: tuple[np.ndarray, ...]
    #: labelled samples for accuracy (``--dataset``), or None
    dataset: tuple[tuple[np.ndarray, ...], tuple[int, ...]] | None
    input_shape: tuple[int, ...]
    run_timeout: float
    report_dir: Path | None = None
    #: where the exports go (None: the export cache)
    work_dir: Path | None = None
    #: one build per target, further inputs patched in (else an export and build per input)
    input_feed: InputFeed = InputFeed.ONE_BUILD


def _load_array_file(path: Path) -> list[np.ndarray]:
    try:
        if path.suffix == ".npy":
            return [np.load(path, allow_pickle=False)]
        with np.load(path, allow_pickle=False) as npz:
            return [npz[k] for k in npz.files]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ConfigError(
            f"{path} is not a readable NumPy file: {exc}",
            hint="Save each sample with np.save (.npy) or several with np.savez (.npz).",
        ) from None


def _check_folder(path: Path, option: str, what: str) -> None:
    if not path.exists():
        raise ConfigError(f"{option} {path} does not exist", hint=f"Pass the folder {what}.")
    if not path.is_dir():
        raise ConfigError(
            f"{option} {path} is a file, not a folder", hint=f"Pass the folder {what}."
        )


def load_inputs(folder: Path, shape: tuple[int, ...]) -> list[np.ndarray]:
    """Inputs from ``*.npy`` (one sample each) and ``*.npz`` (every array a sample) files."""
    _check_folder(folder, "--inputs", "of .npy/.npz inputs")
    files = sorted(p for p in folder.iterdir() if p.suffix in (".npy", ".npz") and p.is_file())
    if not files:
        raise ConfigError(
            f"{folder} holds no .npy or .npz inputs", hint="Save samples with np.save."
        )
    arrays = [a for path in files for a in _load_array_file(path)]
    out = []
    for i, array in enumerate(arrays):
        if array.dtype.kind not in "fiub":
            raise ConfigError(
                f"input {i} from {folder} holds {array.dtype} values, not numbers",
                hint="Save numeric arrays (float32) of the model's input shape.",
            )
        if array.size != math.prod(shape):
            raise ConfigError(
                f"input {i} from {folder} has {array.size} values; the model takes {list(shape)}",
                hint="One sample per array, of the model's input shape.",
            )
        out.append(array.reshape(shape).astype(np.float32))
    return out


def load_dataset(folder: Path, shape: tuple[int, ...]) -> tuple[list[np.ndarray], list[int]]:
    """Labelled samples: ``*.npz`` files holding ``x`` (N samples) and ``y`` (N labels)."""
    _check_folder(folder, "--dataset", "of .npz files with x and y")
    files = sorted(folder.glob("*.npz"))
    if not files:
        raise ConfigError(f"{folder} holds no .npz file", hint="np.savez(f, x=samples, y=labels)")
    samples: list[np.ndarray] = []
    labels: list[int] = []
    for path in files:
        try:
            with np.load(path, allow_pickle=False) as npz:
                if "x" not in npz.files or "y" not in npz.files:
                    raise ConfigError(f"{path} lacks 'x' or 'y'", hint="np.savez(f, x=..., y=...)")
                x, y = npz["x"], npz["y"].reshape(-1)
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise ConfigError(
                f"{path} is not a readable .npz file: {exc}",
                hint="np.savez(f, x=samples, y=labels)",
            ) from None
        if len(x) != len(y):
            raise ConfigError(f"{path}: {len(x)} samples but {len(y)} labels")
        if x.size != len(x) * math.prod(shape):
            raise ConfigError(
                f"{path}: each sample must have the model's input shape {list(shape)}",
                hint="x holds N samples of the model's input shape.",
            )
        samples += [s.reshape(shape).astype(np.float32) for s in x]
        labels += [int(v) for v in y]
    return samples, labels


def check_report_folder(path: Path) -> Path:
    """``ReportError`` unless ``validate`` may write its report (and run bundles) at ``path``:
    a new or empty folder, or an earlier validation report (replaced). Nothing is created."""
    path = Path(path).expanduser().absolute()
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise ReportError(
                f"--report {path} is a file, not a folder",
                hint="Pass a folder for the validation report.",
            )
        if any(path.iterdir()) and not any((path / n).is_file() for n in REPORT_FILES):
            raise ReportError(
                f"--report {path} is not empty and holds no validation report; "
                "refusing to write into it",
                hint="Pass a new or empty folder, or an earlier validation report.",
            )
    from aidge_deploy.report.destination import probe_writable

    probe_writable(path if path.is_dir() else path.parent, f"--report {path}", "the report")
    return path


def check_validation(
    model: Path,
    targets: Sequence[str],
    *,
    dtype: str = "float32",
    inputs: Path | None = None,
    dataset: Path | None = None,
    report_dir: Path | None = None,
    work_dir: Path | None = None,
    run_timeout: float = 300.0,
    build_per_input: bool = False,
) -> ValidationRequest:
    """Check every input of a validation (see the module docstring)."""
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.configcheck import check_deploy_config
    from aidge_deploy.modelexport import Dtype, check_onnx_model, onnx_input_shapes
    from aidge_deploy.modelinputs import check_int8_range

    names = tuple(dict.fromkeys(t.strip() for t in targets if t.strip()))
    if not names:
        raise ConfigError("--targets names no target", hint="e.g. --targets host,mps2-an386")
    if dtype not in {d.value for d in Dtype}:
        raise ConfigError(f"Unknown dtype {dtype!r}", hint="Use float32 or int8.")
    for target in names:  # unknown targets (did you mean), timeout, tools, in this order
        check_deploy_config(DeployConfig(target=target, run_timeout=run_timeout), target)
    check_onnx_model(model)
    shapes = onnx_input_shapes(model)
    if len(shapes) != 1:
        raise ConfigError(
            f"{model.name} has {len(shapes)} inputs: validate supports models with one input "
            "(as Aidge's exporter does)"
        )
    shape = shapes[0][1]
    xs = load_inputs(inputs, shape) if inputs is not None else []
    labelled = load_dataset(dataset, shape) if dataset is not None else None
    if not xs:  # the default sample: uniform in [-1, 1] (the int8 export's input range)
        xs = [np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)]
    if dtype == Dtype.INT8:
        check_int8_range(xs + list(labelled[0] if labelled else []))
    if work_dir is not None and work_dir.exists() and not work_dir.is_dir():
        raise ConfigError(
            f"--work-dir {work_dir} is a file, not a folder", hint="Pass a folder for the exports."
        )
    return ValidationRequest(
        model=model.absolute(),
        targets=names,
        dtype=dtype,
        inputs=tuple(xs),
        dataset=None if labelled is None else (tuple(labelled[0]), tuple(labelled[1])),
        input_shape=shape,
        run_timeout=run_timeout,
        report_dir=None if report_dir is None else check_report_folder(report_dir),
        work_dir=None if work_dir is None else work_dir.absolute(),
        input_feed=InputFeed.PER_INPUT if build_per_input else InputFeed.ONE_BUILD,
    )
