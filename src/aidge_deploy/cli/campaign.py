"""``aidge-deploy campaign CAMPAIGN.yaml`` and ``profile``/``run`` with ``--targets``.

Thin: parse, plan (every input checked before anything runs), run under the command's
``RunControl`` (Ctrl-C, SIGTERM, SIGHUP stop every running cell), show the live view, then
the figures and where the report is (``cli.campaign_view`` renders them). Exit 0 when every cell is done, 1 when a cell failed,
2 for bad input, 128 + the signal when interrupted.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from aidge_deploy.cli.render import console
from aidge_deploy.errors import ConfigError, DeployError

if TYPE_CHECKING:
    from aidge_deploy.campaign.plan import CampaignPlan

EXIT_DONE = 0
EXIT_FAILED_CELLS = 1


def default_folder(name: str, source: Path | None) -> Path:
    """Where a campaign without ``--out`` lives: in the cache, keyed by its file's path (a
    re-run finds it again), never in the current folder."""
    import hashlib

    from aidge_deploy.cachedir import default_cache_root

    where = str(source.resolve()) if source is not None else name
    digest = hashlib.sha256(where.encode()).hexdigest()[:10]
    return default_cache_root() / "campaigns" / f"{name}-{digest}"


def execute(
    plan: CampaignPlan,
    folder: Path,
    *,
    retry_failed: bool,
    show_progress: bool,
    side_by_side_view: bool,
    verbose: bool,
    history: str | Path | None = None,
    history_name: str | None = None,
) -> None:
    """Run ``plan`` into ``folder`` under the command's signal handling; exit accordingly."""
    from aidge_deploy.campaign.runner import CampaignRun
    from aidge_deploy.cli.campaign_view import live_progress, print_outcome
    from aidge_deploy.cli.runs import fail, print_interrupted, stoppable

    with stoppable() as control:
        try:
            run = CampaignRun(
                plan,
                folder,
                retry_failed=retry_failed,
                history=history,
                history_name=history_name,
            )
            with control.activate(), live_progress(run.progress, show_progress):
                result = run.run(control)
        except DeployError as exc:
            raise fail(exc, verbose) from None
        print_outcome(result, side_by_side_view=side_by_side_view)
        stopped = result.interrupted
        if stopped is not None:
            stopped.log_path = folder
            print_interrupted(stopped)
            raise typer.Exit(code=stopped.exit_status)
    raise typer.Exit(code=EXIT_FAILED_CELLS if result.failed else EXIT_DONE)


def campaign(
    campaign_file: Path = typer.Argument(..., help="The campaign's YAML file."),  # noqa: B008
    out: Path | None = typer.Option(  # noqa: B008
        None, "--out", help="Campaign folder (default: in the cache, named after the file)."
    ),
    calibration: Path | None = typer.Option(  # noqa: B008
        None, help="Folder of .npy/.npz int8 calibration inputs (overrides the file's)."
    ),
    retry_failed: bool = typer.Option(False, help="Run the cells that failed earlier again."),
    history: str | None = typer.Option(
        None,
        help="Results history each finished cell is recorded in: a SQLite file or a "
        "database URL (default: the file's history:, else history.db in the campaign folder).",
    ),
    jobs: int | None = typer.Option(None, help="Emulated cells at once (default: cores)."),
    quiet: bool = typer.Option(False, help="No live view."),
) -> None:
    """Run a campaign: models x targets x options, the missing cells only, one report.

    A cell is one model on one target with one option set; cells are keyed by content, so
    a campaign run again (after a crash, with one more model) runs only the cells it has no
    result for. See the module docs of aidge_deploy.campaign.spec for the file format.
    """
    from aidge_deploy.campaign.cell import preflight
    from aidge_deploy.campaign.plan import plan_campaign
    from aidge_deploy.campaign.spec import load_campaign
    from aidge_deploy.cli.runs import fail

    verbose = "-v" in sys.argv or "--verbose" in sys.argv
    try:
        spec = load_campaign(campaign_file)
        if jobs is not None:
            if jobs < 1:
                raise ConfigError(f"--jobs must be at least 1, got {jobs}", hint="e.g. --jobs 2")
            spec = spec.model_copy(update={"run": spec.run.model_copy(update={"jobs": jobs})})
        if calibration is not None and not calibration.is_dir():
            raise ConfigError(
                f"--calibration {calibration} is not a folder", hint="A folder of .npy/.npz files."
            )
        plan = plan_campaign(spec, campaign_file.absolute(), calibration=calibration)
        _check_farm_password(plan)
        preflight(plan)
        folder = out or default_folder(plan.name, campaign_file)
        _check_folder(folder)
    except DeployError as exc:
        raise fail(exc, verbose) from None
    console.print(
        f"[bold]Campaign {plan.name}:[/bold] {len(plan.models)} model(s) x "
        f"{len(plan.targets)} target(s), {len(plan.cells)} cells → {folder}",
        highlight=False,
        soft_wrap=True,
    )
    execute(
        plan,
        folder,
        retry_failed=retry_failed,
        show_progress=not quiet,
        side_by_side_view=False,
        verbose=verbose,
        history=history or plan.history or folder / "history.db",
    )


def _check_folder(folder: Path) -> None:
    """A campaign folder is a folder (new, empty, or an earlier run of a campaign)."""
    from aidge_deploy.campaign.folder import PLAN_NAME

    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--out {folder} is a file, not a folder", hint="Pass a folder.")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / PLAN_NAME).is_file():
        raise ConfigError(
            f"--out {folder} is not empty and holds no campaign; refusing to write into it",
            hint="Pass a new or empty folder, or the folder of an earlier run of the campaign.",
        )
    from aidge_deploy.report.destination import probe_writable

    probe_writable(folder, f"--out {folder}", "the campaign folder")


def _check_farm_password(plan: CampaignPlan) -> None:
    import os

    from aidge_deploy.campaign.cell import farm_password_missing

    if farm_password_missing(plan):
        if sys.stdin.isatty():
            os.environ["AIDGE_DEPLOY_API_PASSWORD"] = str(
                typer.prompt("Board-farm password", hide_input=True)
            )
            return
        raise ConfigError(
            "farm targets need the farm's password: set AIDGE_DEPLOY_API_PASSWORD",
            hint="export AIDGE_DEPLOY_API_PASSWORD=... (never in the campaign file).",
        )


#: DeployConfig values of the command line that are measurements (a campaign's ``measure``)
#: or results (a campaign's folder), not how a bare target name is reached
_NOT_CONNECTION = frozenset(
    {"counters", "power", "power_window_s", "power_sysfs_root", "run_timeout", "report_dir",
     "report_overwrite", "max_counters_per_pass"}
)  # fmt: skip
_FARM_OPTIONS = ("api_url", "api_username", "api_poll_interval")


def targets_plan(
    model: Path,
    targets: str,
    *,
    config_values: Mapping[str, Any],
    dtype: str = "float32",
    iterations: int = 10,
    warmup: int = 2,
    calibration: Path | None = None,
    lab: Path | None = None,
    dataset: Path | None = None,
) -> CampaignPlan:
    """The one-model campaign of ``profile MODEL --targets`` (or ``run EXPORT --targets``);
    ``lab``: the lab file that ``lab:BOARD`` targets name."""
    from aidge_deploy.backendoptions import FarmOptions
    from aidge_deploy.campaign.plan import plan_campaign
    from aidge_deploy.campaign.spec import CampaignError, TargetKind, parse_campaign, parse_targets

    refs = parse_targets(targets)
    values = dict(config_values)
    measure: dict[str, Any] = {}
    if values.get("counters"):
        measure["counters"] = tuple(values["counters"])
    if values.get("power"):
        measure["power"] = values["power"]
    if values.get("power_window_s"):
        measure["power_window"] = values["power_window_s"]
    farm = {k: values[k] for k in _FARM_OPTIONS if values.get(k) is not None}
    farm_own = tuple(r for r in values.get("backend_options", ()) if isinstance(r, FarmOptions))
    if farm_own:  # --api-job-timeout: the farm's own options reach its cells
        farm["backend_options"] = farm_own
    local = {k: v for k, v in values.items() if k not in _NOT_CONNECTION}
    if _remote(local.get("backend")):  # the farm's options reach its backend
        local.update(farm)
    if lab is None and any(r.kind is TargetKind.LAB for r in refs):
        raise CampaignError(
            "lab:BOARD targets need the lab file that names the boards",
            hint="Pass --lab lab.yaml (`aidge-deploy boards scan --write lab.yaml` writes one).",
        )
    if not farm.get("api_url") and any(r.kind is TargetKind.FARM for r in refs):
        raise CampaignError(
            "farm:TARGET targets need the farm's address",
            hint="Pass --api-url (and --api-username).",
        )
    spec = parse_campaign(
        {
            "models": [
                {"path": str(model.absolute())}
                | ({} if dataset is None else {"dataset": str(dataset.absolute())})
            ],
            "targets": list(refs),
            "options": {"dtype": dtype, "iterations": iterations, "warmup": warmup},
            "measure": measure,
            "run": {"timeout": values.get("run_timeout", 300.0)},
            "farm": {"url": farm["api_url"], "username": farm.get("api_username")}
            if farm.get("api_url")
            else None,
            "lab": None if lab is None else str(lab.absolute()),
        }
    )
    plan = plan_campaign(
        spec,
        None,
        calibration=calibration,
        local_options=local,
        farm_options=farm or None,
    )
    export_target = plan.models[0].export_target
    others = [
        t.label for t in plan.targets if t.target.lower() != (export_target or t.target).lower()
    ]
    if others:
        raise CampaignError(
            f"{model} is an export for {export_target}: it cannot run on {', '.join(others)}",
            hint=f"Name {export_target} targets only (here, a lab board or the farm), or "
            "profile the ONNX model on several targets.",
        )
    return plan


def profile_targets(
    model: Path,
    targets: str,
    *,
    dtype: str,
    iterations: int,
    warmup: int,
    calibration: Path | None,
    config_values: Mapping[str, Any],
    as_json: bool,
    verbose: bool,
    lab: Path | None = None,
    history: Path | None = None,
    history_name: str | None = None,
    dataset: Path | None = None,
) -> None:
    """``profile MODEL --targets a,b,c`` and ``run EXPORT --targets a,b,c``: one cell per
    target, concurrently where the targets allow, then the targets side by side; with
    ``history``, each target's run is recorded there (as ``history_name``, default the
    model's file name)."""
    import secrets

    from aidge_deploy.cachedir import default_cache_root
    from aidge_deploy.campaign.cell import preflight
    from aidge_deploy.campaign.runner import CELLS_JSON
    from aidge_deploy.cli.runs import fail, stoppable

    report = config_values.get("report_dir")
    try:
        plan = targets_plan(
            model,
            targets,
            config_values=config_values,
            dtype=dtype,
            iterations=iterations,
            warmup=warmup,
            calibration=calibration,
            lab=lab,
            dataset=dataset,
        )
        _check_farm_password(plan)
        preflight(plan)
        if report is not None:
            from aidge_deploy.report.destination import check_report_dir

            folder = Path(report)
            _replace_folder(folder, overwrite=bool(config_values.get("report_overwrite")))
            check_report_dir(folder, overwrite=True)
        else:
            stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
            folder = (
                default_cache_root()
                / "campaigns"
                / f"{stamp}-{plan.models[0].name}-{secrets.token_hex(3)}"
            )
    except DeployError as exc:
        raise fail(exc, verbose) from None
    if as_json:
        from aidge_deploy.campaign.runner import CampaignRun

        with stoppable() as control, control.activate():
            result = CampaignRun(plan, folder, history=history, history_name=history_name).run(
                control
            )
        sys.stdout.write((folder / CELLS_JSON).read_text(encoding="utf-8"))
        if result.interrupted is not None:
            raise typer.Exit(code=result.interrupted.exit_status)
        raise typer.Exit(code=EXIT_FAILED_CELLS if result.failed else EXIT_DONE)
    execute(
        plan,
        folder,
        retry_failed=False,
        show_progress=True,
        side_by_side_view=True,
        verbose=verbose,
        history=history,
        history_name=history_name,
    )


def _replace_folder(folder: Path, *, overwrite: bool) -> None:
    """``--report DIR`` of a multi-target run: new, empty, or replaced with --overwrite."""
    import shutil

    from aidge_deploy.campaign.folder import PLAN_NAME
    from aidge_deploy.errors import ReportError

    if not folder.exists():
        return
    if not folder.is_dir():
        raise ReportError(f"--report {folder} is a file, not a folder", hint="Pass a folder.")
    if not any(folder.iterdir()):
        return
    if not (folder / PLAN_NAME).is_file():
        raise ReportError(
            f"--report {folder} is not empty and holds no multi-target report",
            hint="Pass a new or empty folder.",
        )
    if not overwrite:
        raise ReportError(
            f"--report {folder} already holds a multi-target report",
            hint="Pass --overwrite to replace it, or another folder.",
        )
    shutil.rmtree(folder)


def _remote(backend: object) -> bool:
    """Whether ``backend`` runs the whole deploy elsewhere (a remote backend: the farm)."""
    from aidge_deploy.registry import remote_backend

    return bool(backend) and remote_backend(str(backend)) is not None


__all__ = ["campaign", "default_folder", "execute", "profile_targets", "targets_plan"]
