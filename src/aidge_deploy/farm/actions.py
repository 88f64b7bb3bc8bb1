"""What users do on the farm, over the service's shared state: the REST routes and the
dashboard's pages call these (neither imports the other)."""

from __future__ import annotations

from pathlib import Path

from aidge_deploy.errors import DeployError
from aidge_deploy.farm.agents import Release
from aidge_deploy.farm.auth import Principal
from aidge_deploy.farm.db import ExportRecord
from aidge_deploy.farm.jobconfig import JobConfig
from aidge_deploy.farm.jobs import cancel_job, export_for, record_export, submit_job
from aidge_deploy.farm.jobviews import job_status
from aidge_deploy.farm.models import JobView, SubmitRequest
from aidge_deploy.farm.refusals import FarmRequestError
from aidge_deploy.farm.state import FarmState
from aidge_deploy.farm.store import ExportFacts, StoredExport


def ingest_export(state: FarmState, path: Path, who: Principal, name: str) -> StoredExport:
    """Check and store an uploaded archive, and record it for ``who``."""
    stored = state.store.ingest(path)
    with state.db.session() as s:
        record_export(s, stored, who, name)
    return stored


def export_facts(state: FarmState, export: ExportRecord) -> ExportFacts:
    """The facts a submission of ``export`` is checked against (its model's inputs)."""
    if export.facts_json:
        try:
            return ExportFacts.from_json(export.facts_json)
        except (ValueError, TypeError, AttributeError):
            pass
    return state.store.facts_of(export.hash)


def check_job_config(config: JobConfig, target: str, facts: ExportFacts | None = None) -> None:
    """A job's config, checked as the board host's deploy would check it (finite, positive
    durations; counters the target can count; validation samples the model's input takes:
    its dtype, its shape) — at submit time, not on the board. 422 naming the field."""
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.farm.jobconfig import check_samples

    try:
        values = config.deploy_values()
        DeployConfig(target=target, **values).check_values()
        if facts is not None:
            check_samples(config, facts.inputs, facts.nb_validation)
        counters = values.get("counters")
        if counters:
            from aidge_deploy.configcheck import check_counter_request
            from aidge_deploy.registry import pipeline_target_class

            cls = pipeline_target_class(target, "local")
            check_counter_request(tuple(counters), cls, target, "local")
    except DeployError as exc:
        raise FarmRequestError(422, exc.message, exc.hint or "") from None


def submit(state: FarmState, who: Principal, body: SubmitRequest) -> JobView:
    """A new job (its config checked first); the dispatcher queues it in labgrid at once."""
    with state.db.session() as s:
        export = export_for(s, who, body.export)
        check_job_config(body.config, body.target or export.target, export_facts(state, export))
        job_id = submit_job(s, who, body)
    state.dispatcher.wake()
    return job_view(state, who, job_id)


def job_view(state: FarmState, who: Principal, job_id: int) -> JobView:
    with state.db.reading() as conn:
        return job_status(conn, who, job_id)


def cancel(state: FarmState, who: Principal, job_id: int) -> JobView:
    """Cancel a job (its owner or an admin) — the REST API's and the pages' cancel."""
    with state.db.session() as s:
        done = cancel_job(s, who, job_id)
    state.dispatcher.release_later(Release(done.token, None))
    state.notifier.notify(f"job:{job_id}", *([f"agent:{done.agent}"] if done.agent else []))
    return job_view(state, who, job_id)


__all__ = ["cancel", "check_job_config", "ingest_export", "job_view", "submit"]
