"""Everything about a run that can be checked before it starts, without an export.

Preflight runs it on every deploy; ``aidge-deploy profile``, ``validate``, a campaign's
preflight and a remote deploy run it before exporting or submitting anything, so a bad
value, a target typo, a missing backend or connection option, an unusable ``--report``
folder or a missing tool costs nothing. It lives here, below the pipeline and the CLI
that both use it, and returns the implementation it resolved: a run builds it once.

``check_run`` is the one check of a run, shared by every way of starting one: the CLI's
``profile`` and the pytest plugin's ``aidge_run`` call it before exporting a model (with the
export request: its iteration and warm-up counts, the model file, the input tensors against
the model's, ``modelinputs``), ``deploy()`` in its Preflight for an export. An iteration
count whose timing arrays cannot fit the program's memory is refused there too, before
anything is exported or built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aidge_deploy.config import DeployConfig
from aidge_deploy.errors import ConfigError, PreflightError
from aidge_deploy.power.registry import parse_power_source
from aidge_deploy.profiling.counters import select_counters
from aidge_deploy.readiness import ToolCheck, missing, missing_text
from aidge_deploy.registry import (
    DeployTarget,
    RemoteBackend,
    get_deploy_target,
    get_deploy_target_class,
    registered_targets,
)
from aidge_deploy.report.destination import check_report_dir
from aidge_deploy.targetcaps import counter_source_class, target_caps

if TYPE_CHECKING:
    import numpy as np

    from aidge_deploy.exportspec import Manifest
    from aidge_deploy.modelexport import ExportRequest


def check_deploy_config(config: DeployConfig, target: str) -> DeployTarget | RemoteBackend:
    """Check ``config`` for ``target``; the target's implementation (a local target, or the
    remote backend that runs the whole deploy), instantiated with ``config``.

    Raises ``ConfigError`` (values, unknown target with a did-you-mean, a backend the target
    has not, connection options the backend needs, counters), ``ReportError`` (the report
    folder) or ``PreflightError`` (tools missing on this machine).
    """
    config.check_values()
    if config.power is not None:  # its spelling: a registered monitor, with its argument
        parse_power_source(config.power)
    cls = get_deploy_target_class(target, config.backend_kind)
    caps = target_caps(cls)
    if config.ssh.board_name and not caps.over_ssh:
        raise ConfigError(
            f"sbc_board_name {config.ssh.board_name!r} names an SSH board, and backend "
            f"{config.backend_kind!r} reaches none",
            hint="Use it with a backend that reaches a board over SSH (--backend ssh or "
            "ssh_docker; a farm board is api_board_name).",
        )
    if issubclass(cls, DeployTarget):  # a remote backend checks them where they are counted
        check_counter_request(config.counters, cls, target, config.backend_kind)
        source = counter_source_class(cls) if config.counters else None
        if source is not None:
            require(source.counter_needs(), f"Counting on {target}/{config.backend_kind}")
    if config.power is not None:
        from aidge_deploy.power.monitors import preflight_checks

        require(preflight_checks(config, cls, caps), f"Power monitor {config.power}")
    instance = get_deploy_target(target, config.backend_kind, config)
    instance.check_config()
    if config.report_dir is not None:
        check_report_dir(config.report_dir, overwrite=config.report_overwrite)
    require(instance.preflight(), f"Target {target}/{config.backend_kind}")
    return instance


def timed_iterations(manifest: Manifest) -> int | None:
    """The timed iterations of a benchmark export (None for another kind)."""
    app = manifest.application_config or {}
    kind = manifest.application or app.get("kind")
    iterations = app.get("nb_iterations") if kind in (None, "benchmark") else None
    return None if iterations is None else int(iterations)


def check_iterations(
    iterations: int, config: DeployConfig, target: str, implementation: DeployTarget | RemoteBackend
) -> None:
    """``ConfigError`` unless ``iterations`` fits the program's memory (``check_iterations_fit``:
    the target's RAM, or the stack limit of a Linux program)."""
    from aidge_deploy.modelexport import check_iterations_fit

    local = (
        implementation
        if isinstance(implementation, DeployTarget)
        else implementation.local_target_class  # a farm runs the target's own entry
    )
    check_iterations_fit(
        iterations,
        target,
        implementation.memory_capacities(),
        local_host=target_caps(implementation).this_machine and not config.docker.image,
        bytes_per_iteration=local.benchmark_bytes_per_iteration,
    )


def check_run(
    config: DeployConfig,
    target: str,
    *,
    request: ExportRequest | None = None,
    iterations: int | None = None,
    parse_model: bool = True,
) -> tuple[DeployTarget | RemoteBackend, tuple[np.ndarray, ...]]:
    """Everything about a run that can be refused before it exports or builds anything (see
    the module docstring); the target's implementation and, with a ``request``, its input
    tensors as the export takes them.

    ``request``: the export a model run would make (its counts, model file and input
    tensors are checked; ``parse_model=False`` for a model whose bytes were exported before,
    an export cache hit); ``iterations``: the timed iterations of an export being deployed
    (default: the request's).
    """
    inputs: tuple[np.ndarray, ...] = ()
    if request is not None:
        from aidge_deploy.modelexport import check_onnx_model, check_request
        from aidge_deploy.modelinputs import check_inputs

        check_request(request)
        check_onnx_model(request.model, parse=parse_model or bool(request.inputs))
        inputs = check_inputs(request.model, request.inputs, request.dtype.value)
        if iterations is None:
            iterations = request.nb_iterations
    implementation = check_deploy_config(config, target)
    if request is not None and parse_model:  # a cached export was built before
        from aidge_deploy.modelfit import check_model_fits

        check_model_fits(
            request.model, request.dtype.value, target, implementation.memory_capacities()
        )
    if iterations is not None:
        if isinstance(iterations, bool) or iterations < 1:
            raise ConfigError(
                f"--iterations must be at least 1, got {iterations}", hint="e.g. --iterations 20"
            )
        check_iterations(iterations, config, target, implementation)
    return implementation, inputs


def check_counter_request(
    counters: tuple[str, ...], target_cls: type, target: str, backend: str
) -> None:
    """Fail early (Preflight calls this too) on counters the target cannot count or typos."""
    if not counters:
        return
    source = counter_source_class(target_cls)
    if source is None:
        capable = sorted(
            f"{t}/{b}"
            for (t, b), cls in registered_targets().items()
            if target_caps(cls).counters is not None
        )
        raise ConfigError(
            f"Counters were requested ({', '.join(counters)}), but target {target}/{backend} cannot count events",
            hint="Drop counters= (--counters), or deploy on a counter-capable target: "
            + (", ".join(capable) or "none registered")
            + ".",
        )
    # names and presets are checked against the catalogue (did-you-mean on typos)
    select_counters(counters, source.counter_domain)


def require(checks: list[ToolCheck], what: str) -> None:
    """``PreflightError`` naming what is missing and how to get it, in the words of
    ``doctor``'s row for it (``readiness.missing_text``)."""
    if missing(checks):
        absent, how = missing_text(checks)
        raise PreflightError(f"{what} is missing {absent}", hint=how)


__all__ = [
    "check_counter_request",
    "check_deploy_config",
    "check_iterations",
    "check_run",
    "require",
    "timed_iterations",
]
