"""The tools that run on boards here: ``profile`` and ``validate``.

Why this module exists: they are ``aidge-deploy profile`` and ``aidge-deploy validate`` as
tools — the same checks (``modelprofile.check_profile``, ``validation.inputs``), the same
export cache, the same deploy — behind the session's rules: the target must be allowed,
each run takes one run of the budget and its board time, and a cancelled call stops its
run. The figures come back with units and provenance, and with where they are kept (the
run's folder and bundle, its history record when the server keeps a history).
"""

# no `from __future__ import annotations`: the SDK evaluates the tools' annotations,
# some of which name the session's limits
import functools
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from aidge_deploy.mcpserver.budget import Ticket
from aidge_deploy.mcpserver.outputs import BudgetReport, RunFigures, run_figures
from aidge_deploy.mcpserver.session import Session
from aidge_deploy.runcontrol import RunControl

#: a run: it holds a board, writes caches and bundles, and takes from the budget
RUNS = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)
#: the source runs are recorded under in the results history
SOURCE = "mcp"

Dtype = Literal["float32", "int8"]


class ExportInfo(BaseModel):
    path: str
    reused: bool = Field(description="taken from the export cache (same model and settings)")
    seconds: float = Field(description="how long the export took, s (host wall time)")
    quantisation: str | None = Field(description="int8: what it was quantised with")


class ProfileOutput(BaseModel):
    model: str
    target: str
    dtype: str
    export: ExportInfo
    run: RunFigures
    budget: BudgetReport


class ValidateOutput(BaseModel):
    """The target x output matrix against the reference run (``validate --json``)."""

    passed: bool
    failures: list[str]
    report: dict[str, Any]
    logs: str
    budget: BudgetReport


def _history(session: Session, name: str) -> Any:
    from aidge_deploy.history.request import HistoryRequest

    return HistoryRequest.of(session.settings.history, name, SOURCE)


def check_profile_call(
    session: Session,
    model: Path,
    target: str,
    dtype: str,
    iterations: int,
    warmup: int,
    calibration: Path | None,
    timeout_s: float,
    config_values: dict[str, Any] | None = None,
) -> Any:
    """The policy's target allowlist, then every input, as ``profile`` checks them."""
    from aidge_deploy.modelprofile import ProfileRequest, check_profile

    session.policy.check_target(target)
    request = ProfileRequest(
        model=model,
        target=target,
        dtype=dtype,
        iterations=iterations,
        warmup=warmup,
        calibration=calibration,
        config_values={**(config_values or {}), "run_timeout": timeout_s},
        history=_history(session, model.stem),
    )
    return check_profile(request)


def profile_run(
    session: Session, checked: Any, tickets: list[Ticket], control: RunControl
) -> ProfileOutput:
    from aidge_deploy.modelexport import Dtype as ExportDtype
    from aidge_deploy.modelprofile import quantisation_note, run_profile

    (ticket,) = tickets
    outcome = run_profile(checked, control=control, on_export=lambda _: ticket.hold_board())
    request = checked.request
    export = outcome.export
    return ProfileOutput(
        model=str(request.model),
        target=request.target,
        dtype=request.dtype,
        export=ExportInfo(
            path=str(export.path),
            reused=export.reused,
            seconds=round(export.duration_s, 3),
            quantisation=quantisation_note(request.calibration, checked.calibration_count)
            if checked.export_request.dtype is ExportDtype.INT8
            else None,
        ),
        run=run_figures(
            outcome.result, history_record=None if outcome.record is None else outcome.record.id
        ),
        budget=session.budget_report(),
    )


def validate_run(
    session: Session, request: Any, tickets: list[Ticket], control: RunControl
) -> ValidateOutput:
    from aidge_deploy.api import new_run_dir
    from aidge_deploy.history import HistoryStore
    from aidge_deploy.validation.runner import validate_model

    run_root = new_run_dir("validate")
    control.log_path = run_root
    for ticket in tickets:
        ticket.hold_board()
    location = session.settings.history
    store = None if location is None else HistoryStore(location)
    try:
        report = validate_model(request, run_root=run_root, control=control, history=store)
    finally:
        if store is not None:
            store.close()
    for ticket, target in zip(tickets, request.targets, strict=True):
        took = report.durations_s.get(target)
        if took is not None:  # each target's own job time, not the whole call's
            ticket.charge_with(functools.partial(float, took))
    return ValidateOutput(
        passed=report.passed,
        failures=report.failures(),
        report=report.as_dict(),
        logs=str(run_root),
        budget=session.budget_report(),
    )


def register(server: MCPServer, session: Session) -> None:
    """``profile`` and ``validate``, on ``server``."""
    limit = session.settings.max_run_timeout_s

    @server.tool(name="profile", annotations=RUNS, title="Profile a model on a target")
    async def profile_model(
        model: Annotated[str, Field(description="ONNX model file (on the server's machine)")],
        target: Annotated[str, Field(description="deploy target, e.g. host, mps2-an386")] = "host",
        dtype: Dtype = "float32",
        iterations: Annotated[int, Field(ge=1, le=100_000, description="timed inferences")] = 10,
        warmup: Annotated[int, Field(ge=0, le=10_000, description="warm-up inferences")] = 2,
        calibration: Annotated[
            str | None, Field(description="int8: folder of .npy/.npz inputs to calibrate on")
        ] = None,
        timeout_s: Annotated[
            float, Field(gt=0, le=limit, description="timeout of each program run, s")
        ] = min(300.0, limit),
    ) -> ProfileOutput:
        """Export MODEL with Aidge (benchmark, per-layer profiling) and deploy it on TARGET:
        latency, cycles or emulated instructions, per-layer figures and memory, each with
        its unit and provenance. Takes one run of the session's budget."""
        path = Path(model)
        return await session.run(
            "profile",
            f"profile of {path.name} on {target}",
            lambda: check_profile_call(
                session,
                path,
                target,
                dtype,
                iterations,
                warmup,
                None if calibration is None else Path(calibration),
                timeout_s,
            ),
            lambda checked, tickets, control: profile_run(session, checked, tickets, control),
        )

    @server.tool(name="validate", annotations=RUNS, title="Validate a model's outputs")
    async def validate_outputs(
        model: Annotated[str, Field(description="ONNX model file (on the server's machine)")],
        targets: Annotated[list[str], Field(min_length=1, description="targets to compare")],
        dtype: Dtype = "float32",
        inputs: Annotated[
            str | None, Field(description="folder of .npy/.npz inputs (default: one sample)")
        ] = None,
        dataset: Annotated[
            str | None, Field(description="folder of .npz files with x and y: accuracy")
        ] = None,
        timeout_s: Annotated[
            float, Field(gt=0, le=limit, description="timeout of each program run, s")
        ] = min(300.0, limit),
    ) -> ValidateOutput:
        """Run MODEL in output mode on each target and compare every output with a
        reference run. Takes one run of the budget per target."""
        from aidge_deploy.validation.inputs import check_validation

        names = list(dict.fromkeys(t.strip() for t in targets if t.strip()))

        def check() -> Any:
            for name in names:
                session.policy.check_target(name)
            return check_validation(
                Path(model),
                names,
                dtype=dtype,
                inputs=None if inputs is None else Path(inputs),
                dataset=None if dataset is None else Path(dataset),
                run_timeout=timeout_s,
            )

        return await session.run(
            "validate",
            f"validation of {Path(model).name}",
            check,
            lambda request, tickets, control: validate_run(session, request, tickets, control),
            runs=max(1, len(names)),
        )


__all__ = ["RUNS", "SOURCE", "check_profile_call", "register"]
