"""Shared fixtures: real Aidge exports of the small models in ``modelzoo``, built once per session."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

import modelzoo  # after the sys.path entry above

pytest_plugins = [
    "envparts",
    "boards",
    "testfw",
    "farmkit",
    "pytester",
    "browser",
    "proctree",
    "pgkit",
]


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Keep the build cache and run logs of the tests out of the user's ~/.cache."""
    root = tmp_path_factory.mktemp("aidge-deploy-cache")
    old = os.environ.get("AIDGE_DEPLOY_CACHE_DIR")
    os.environ["AIDGE_DEPLOY_CACHE_DIR"] = str(root)
    yield root
    if old is None:
        os.environ.pop("AIDGE_DEPLOY_CACHE_DIR", None)
    else:
        os.environ["AIDGE_DEPLOY_CACHE_DIR"] = old


@pytest.fixture(scope="session", autouse=True)
def _wide_console() -> Iterator[None]:
    """What the CLI renders does not depend on the terminal the suite runs in: COLUMNS is
    pinned wide for the session (the commands it starts inherit it), so no message a test
    looks for is wrapped between its words. A test of narrow rendering sets its own."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "200"
    yield
    if old is None:
        os.environ.pop("COLUMNS", None)
    else:
        os.environ["COLUMNS"] = old


@pytest.fixture(autouse=True)
def _user_errors_are_not_bugs(
    request: pytest.FixtureRequest, _isolated_cache: Path
) -> Iterator[None]:
    """No test ends in an internal error (exit 3, a traceback kept to report) unless it is
    marked ``internal_error``: every user error a test provokes, in this process or in a
    command it starts, must be a user error (exit 2 or the command's own code)."""
    from aidge_deploy import bugreport

    kept_here = len(bugreport.KEPT)
    folder = _isolated_cache / bugreport.FOLDER
    kept_before = set(folder.glob("*.log"))
    yield
    kept = [*bugreport.KEPT[kept_here:], *sorted(set(folder.glob("*.log")) - kept_before)]
    if kept and request.node.get_closest_marker("internal_error") is None:
        texts = "\n\n".join(path.read_text(errors="replace")[-3000:] for path in kept[:3])
        pytest.fail(f"the test ended in an internal error (exit 3), kept in {kept}:\n{texts}")


@pytest.fixture(scope="session")
def tiny_cnn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return modelzoo.tiny_cnn(tmp_path_factory.mktemp("models") / "tiny_cnn.onnx")


@pytest.fixture(scope="session")
def tiny_input() -> np.ndarray:
    return modelzoo.sample_input((1, 3, 4, 4))


ExportFactory = Callable[..., object]


@pytest.fixture(scope="session")
def export_factory(
    tmp_path_factory: pytest.TempPathFactory, tiny_cnn: Path, tiny_input: np.ndarray
) -> ExportFactory:
    """``export_factory(kind, target="host", dtype="float32", **app)`` -> ExportArtifact (cached)."""
    cache: dict[tuple[object, ...], object] = {}
    root = tmp_path_factory.mktemp("exports")

    def make(
        kind: str,
        target: str = "host",
        dtype: str = "float32",
        model: Path | None = None,
        **app: object,
    ) -> object:
        key = (kind, target, dtype, model, tuple(sorted(app.items())))
        if key not in cache:
            cache[key] = export_with_aidge(
                model or tiny_cnn,
                root / f"{target}_{kind}_{dtype}_{len(cache)}",
                target=target,
                kind=kind,
                dtype=dtype,
                x=tiny_input,
                **app,
            )
        return cache[key]

    return make


def export_with_aidge(
    model: Path, out: Path, *, target: str, kind: str, dtype: str, x: np.ndarray, **app: object
) -> object:
    """Export ``model`` with the published Aidge exporter, using ``x`` as the sample input."""
    import aidge_backend_cpu  # noqa: F401
    import aidge_core
    import aidge_onnx
    from aidge_core.export_utils import ExportApplication, export
    from aidge_core.export_utils.config import ExportConfig

    from aidge_deploy.modelexport import GRAPH_VIEW_DIR, graph_view_in, load_plugins

    load_plugins()
    tensor = aidge_core.Tensor(x)
    tensor.set_backend("cpu")
    if x.ndim == 4:
        tensor.to_dformat(aidge_core.dformat.nchw)
    elif x.ndim == 2:
        tensor.to_dformat(aidge_core.dformat.nc)
    params = {"nb_warmup": 2, "nb_iterations": 10, "profiling": True}
    params.update(app)
    application = ExportApplication(kind=kind, **params)  # type: ignore[arg-type]
    config = ExportConfig(
        target=target,
        export_folder=str(out),
        dtype=dtype,
        compile=False,
        clone_model=False,
        application=application,
    )
    graph = aidge_onnx.load_onnx(str(model))
    with graph_view_in(out / GRAPH_VIEW_DIR):  # not into the working folder
        return export(graph, config, input_tensors=[tensor])


@pytest.fixture
def ctrl_c() -> Iterator[None]:
    """Python's own Ctrl-C handler for the test. A process started with SIGINT ignored (a
    background job of a non-interactive shell; the ignore is inherited by every child)
    never raises KeyboardInterrupt, so a test that sends itself SIGINT installs it."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
