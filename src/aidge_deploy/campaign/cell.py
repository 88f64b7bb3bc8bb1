"""Running one cell: export (or reuse), deploy with a result bundle, measure accuracy.

Why this module exists: a cell is exactly what ``aidge-deploy profile`` does for one model on
one target — the same export request through the same export cache, the same ``deploy()``
writing the same bundle — so a campaign's figures are those of single runs. On top of it a
cell measures accuracy on its labelled set (a ``validation`` export of the same model,
quantised with the same calibration set) and writes its record. A cell that fails records
its error and logs and does not stop the campaign; a cell that is interrupted writes no
record (it runs again next time) and lets the interruption through.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aidge_deploy.backendoptions import FarmCampaign, FarmOptions, with_own
from aidge_deploy.campaign.figures import accuracy_entry, bundle_figures, memory_fit
from aidge_deploy.campaign.folder import (
    BUNDLE_DIR,
    LOGS_DIR,
    CampaignFolder,
    CellStatus,
    cell_record_base,
)
from aidge_deploy.campaign.models import ModelKind
from aidge_deploy.campaign.plan import CampaignPlan, Cell, quantisation_record
from aidge_deploy.campaign.progress import where_it_runs
from aidge_deploy.errors import DeployError, MemoryFitError
from aidge_deploy.lab import Reach
from aidge_deploy.modelexport import ApplicationKind
from aidge_deploy.progress import ProgressKind, ProgressUpdate
from aidge_deploy.report.reader import read_bundle
from aidge_deploy.report.summary import timing_block
from aidge_deploy.runcontrol import RunControl, RunInterrupted
from aidge_deploy.validation.accuracy import no_interactive_protocol

#: (cell, what it is doing now) — the live view's feed
CellProgress = Callable[[Cell, str], None]

#: why a cell of an export made elsewhere has no accuracy
_MADE_ELSEWHERE = "an export made elsewhere is a benchmark export: accuracy needs the ONNX model"
#: why a farm cell of an export with no interactive protocol has no accuracy
_FARM_FEED = (
    "the farm runs the program elsewhere: its samples cannot be fed to one build (only "
    "bare-metal exports' interactive protocol reaches a farm board)"
)

#: error types that mean "the model does not fit this board's memory"
_FIT_ERRORS = frozenset({MemoryFitError.__name__})


@dataclass(frozen=True)
class CellOutcome:
    cell: Cell
    record: dict[str, Any]
    reused: bool = False

    @property
    def status(self) -> CellStatus:
        return CellStatus(self.record["status"])


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def deploy_values(cell: Cell, plan: CampaignPlan, folder: Path | None = None) -> dict[str, Any]:
    """The cell's ``DeployConfig`` keyword arguments, the farm password included (from the
    environment; it is never written anywhere). A farm cell of a campaign in ``folder``
    carries its campaign, for the farm's dashboard."""
    values: dict[str, Any] = dict(cell.target.deploy_options)
    values["target"] = cell.target.target
    values["run_timeout"] = plan.run.timeout
    if cell.target.reach is Reach.FARM:
        from aidge_deploy.farm.client import password_from_env

        password = password_from_env()
        if password:
            values["api_password"] = password
        if folder is not None:
            campaign = FarmCampaign(
                id=campaign_id(plan, folder),
                name=plan.name,
                cell=f"{cell.model.name} · {cell.target.label} · "
                f"{cell.options.label(plan.varying)}",
                cells=sum(1 for c in plan.cells if c.target.reach is Reach.FARM),
            )
            values = farm_campaign(values, campaign)
    return values


def farm_campaign(values: dict[str, Any], campaign: FarmCampaign) -> dict[str, Any]:
    """``values`` with the farm job's campaign (``FarmOptions.campaign``) set."""
    records = tuple(values.get("backend_options") or ())
    return {**values, "backend_options": with_own(records, FarmOptions, campaign=campaign)}


def campaign_of(values: Mapping[str, Any]) -> FarmCampaign | None:
    """The farm campaign ``values`` carry (None: not a farm cell of a campaign)."""
    for record in values.get("backend_options") or ():
        if isinstance(record, FarmOptions):
            return record.campaign
    return None


def campaign_id(plan: CampaignPlan, folder: Path) -> str:
    """The id of a campaign run in ``folder``: its name and the folder's path, hashed (a
    campaign run again in its folder keeps it; the same file elsewhere is another)."""
    import hashlib

    digest = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:10]
    return f"{plan.name[:80]}-{digest}"


def _describe_error(exc: BaseException, cell: Cell) -> dict[str, Any]:
    kind = getattr(exc, "remote_type", None) or type(exc).__name__
    if isinstance(exc, DeployError):
        log = exc.log_path
        return {
            "type": kind,
            "message": exc.message,
            "hint": exc.hint,
            "stage": exc.stage,
            "log": None if log is None else str(log),
            "does_not_fit": kind in _FIT_ERRORS,
        }
    # a bug of ours: its traceback is kept (bugreport), the campaign goes on
    from aidge_deploy.bugreport import keep_traceback
    from aidge_deploy.errors import REPORT_HINT

    trace = keep_traceback(exc, f"campaign cell {cell.id}")
    return {
        "type": "InternalError",
        "message": f"Internal error: {type(exc).__name__}: {exc}",
        "hint": REPORT_HINT,
        "stage": None,
        "log": None if trace is None else str(trace),
        "does_not_fit": False,
    }


def run_cell(
    cell: Cell,
    plan: CampaignPlan,
    folder: CampaignFolder,
    *,
    control: RunControl,
    progress: CellProgress | None = None,
    reference_accuracy: float | None = None,
) -> CellOutcome:
    """Run ``cell`` to its record (done or failed). ``RunInterrupted`` goes through.

    ``reference_accuracy``: the model's own accuracy on the labelled set (the ONNX model run
    by the reference engine), kept beside the target's.
    """
    say = progress or (lambda _cell, _what: None)
    folder.start_cell(cell)
    record = cell_record_base(cell, plan)
    record.update(started=_now(), quantisation=quantisation_record(cell))
    record["ran_on"] = where_it_runs(cell)
    if reference_accuracy is not None:
        record["reference_accuracy"] = reference_accuracy
    started = time.monotonic()

    def forward(update: ProgressUpdate) -> None:
        if update.kind is ProgressKind.START:
            say(cell, update.stage)
        elif update.kind is ProgressKind.STATUS and update.message:
            say(cell, f"{update.stage}: {update.message}")

    try:
        with control.activate():
            _run(cell, plan, folder, record, forward, say)
        record["status"] = CellStatus.DONE.value
        record["error"] = None
    except RunInterrupted:
        raise
    except Exception as exc:
        control.checkpoint()  # an error caused by the interruption is the interruption
        record["status"] = CellStatus.FAILED.value
        record["error"] = _describe_error(exc, cell)
        if record["error"]["does_not_fit"]:
            record["fits"] = False
    record["finished"] = _now()
    record["duration_s"] = round(time.monotonic() - started, 3)
    folder.finish_cell(cell, record)
    return CellOutcome(cell, record)


def _run(
    cell: Cell,
    plan: CampaignPlan,
    folder: CampaignFolder,
    record: dict[str, Any],
    forward: Callable[[ProgressUpdate], None],
    say: CellProgress,
) -> None:
    from aidge_deploy.api import deploy
    from aidge_deploy.config import DeployConfig

    cell_dir = folder.cell_dir(cell)
    logs = cell_dir / LOGS_DIR
    values = deploy_values(cell, plan, folder.root)
    measure = plan.measure
    say(cell, "Export")
    artifact = _export(cell, plan, ApplicationKind.BENCHMARK, logs, record, "export")
    # accuracy on the labelled set: a second run of the cell (None: it has none, or why not)
    no_accuracy = _no_accuracy(cell, artifact.manifest.environment)
    accuracy_run = cell.model.dataset is not None and no_accuracy is None
    campaign = campaign_of(values)
    if campaign is not None and accuracy_run:
        # the farm's dashboard counts the cell done once its accuracy job is
        values = farm_campaign(values, replace(campaign, step=1, steps=2))
    config = DeployConfig(
        **values,
        report_dir=cell_dir / BUNDLE_DIR,
        counters=measure.counters_for(cell.target.label, cell.target.target),
        power=measure.power_for(cell.target.label, cell.target.target),
        power_window_s=measure.power_window,
    )
    result = deploy(artifact, config, progress=forward, work_dir=logs / "run")
    # the bundle the run wrote, through the one reader: its figures are the cell's
    summary = read_bundle(cell_dir / BUNDLE_DIR, verify=False).summary
    record["bundle"] = BUNDLE_DIR
    record["run_id"] = summary.run_id
    record["provenance"] = summary.provenance.value
    record["timing"] = timing_block(summary.timing)
    record["memory"] = memory_fit(summary.memory)
    record["fits"] = record["memory"]["fits"]
    record["figures"] = bundle_figures(summary)
    record["identity"] = asdict(summary.identity)
    record["validity"] = summary.validity.status.value
    if result.farm_job_id is not None:
        record["farm"] = {"job_id": result.farm_job_id, "board": result.farm_board}
    if cell.model.dataset is not None:
        say(cell, "Accuracy")
        if campaign is not None and accuracy_run:
            values = farm_campaign(values, replace(campaign, step=2, steps=2))
        record["figures"]["accuracy"] = (
            _accuracy(cell, plan, logs, record, values, forward, artifact.manifest.environment)
            if accuracy_run
            else accuracy_entry(
                None, len(cell.model.dataset.arrays), record.get("provenance"), no_accuracy
            )
        )


def _no_accuracy(cell: Cell, environment: str) -> str | None:
    """Why the cell has no accuracy figure (None: it has one to measure)."""
    if cell.model.dataset is None:
        return None
    if cell.model.kind is ModelKind.EXPORT:
        return _MADE_ELSEWHERE
    if cell.target.reach is Reach.FARM and no_interactive_protocol(environment, cell.target.target):
        return _FARM_FEED
    return None


def _export(
    cell: Cell,
    plan: CampaignPlan,
    kind: ApplicationKind,
    logs: Path,
    record: dict[str, Any],
    slot: str,
) -> Any:
    """The cell's export of ``kind`` (an export model is itself), noted in ``record[slot]``."""
    if cell.model.kind is ModelKind.EXPORT:
        from aidge_deploy.artifact import load_export_artifact

        record[slot] = {"path": str(cell.model.path), "reused": True, "given": True}
        return load_export_artifact(cell.model.path)
    from aidge_deploy.exportcache import prepare_export

    request = cell.export_request(Path("."), kind, plan.measure)
    export = prepare_export(request, log_path=logs / f"{slot}.log")
    record[slot] = {
        "path": str(export.path),
        "key": export.key,
        "reused": export.reused,
        "duration_s": round(export.duration_s, 3),
    }
    return export.artifact


def _accuracy(
    cell: Cell,
    plan: CampaignPlan,
    logs: Path,
    record: dict[str, Any],
    values: dict[str, Any],
    forward: Callable[[ProgressUpdate], None],
    environment: str,
) -> dict[str, Any]:
    """The cell's accuracy on its labelled set: through the interactive protocol of a
    ``validation`` export (bare-metal boards), else every sample through the one build of
    an ``output`` export (the host, Linux boards)."""
    from aidge_deploy.modelexport import export_inputs
    from aidge_deploy.validation.accuracy import accuracy_from_outputs, accuracy_on_target

    dataset = cell.model.dataset
    if dataset is None:  # pragma: no cover - checked by the caller
        raise ValueError("no dataset")
    if no_interactive_protocol(environment, cell.target.target) is None:
        artifact = _export(
            cell, plan, ApplicationKind.VALIDATION, logs, record, "validation_export"
        )
        result = accuracy_on_target(
            artifact,
            dataset.arrays,
            dataset.labels,
            dtype=cell.options.dtype.value,
            config_values=values,
            work_dir=logs / "accuracy",
            progress=forward,
        )
    else:  # no interactive protocol: an output export, every sample through its one build
        request = cell.export_request(Path("."), ApplicationKind.OUTPUT, plan.measure)
        artifact = _export(cell, plan, ApplicationKind.OUTPUT, logs, record, "output_export")
        result = accuracy_from_outputs(
            artifact,
            export_inputs(request)[0],
            dataset.arrays,
            dataset.labels,
            config_values=values,
            work_dir=logs / "accuracy",
            progress=forward,
        )
    return accuracy_entry(
        result.accuracy,
        result.samples,
        result.provenance or record.get("provenance"),
        result.unavailable_reason,
    )


def farm_password_missing(plan: CampaignPlan) -> bool:
    """Whether a farm cell would run without a password or token (checked before any cell
    runs)."""
    from aidge_deploy.farm.client import credentials_from_env

    if not any(c.target.reach is Reach.FARM for c in plan.cells):
        return False
    creds = credentials_from_env()
    return not (creds.password or creds.token)


def preflight(plan: CampaignPlan) -> None:
    """Check every target of the campaign before any cell runs: values, connection options,
    counters, power monitor, tools on this machine (``check_deploy_config``, as ``profile``
    does for one target)."""
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.configcheck import check_deploy_config

    measure = plan.measure
    for target in plan.targets:
        cell = next((c for c in plan.cells if c.target is target), None)
        if cell is None:
            continue
        config = DeployConfig(
            **deploy_values(cell, plan),
            counters=measure.counters_for(target.label, target.target),
            power=measure.power_for(target.label, target.target),
            power_window_s=measure.power_window,
        )
        try:
            check_deploy_config(config, target.target)
        except DeployError as exc:
            exc.message = f"target {target.label}: {exc.message}"
            raise


__all__ = [
    "CellOutcome",
    "CellProgress",
    "campaign_id",
    "deploy_values",
    "farm_password_missing",
    "preflight",
    "run_cell",
]
