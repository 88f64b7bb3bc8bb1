"""The farm's REST requests and answers, as typed models shared by service, agent and client.

One definition of every body that crosses the wire, made of the bounded field types of
``fields``: the service validates what it is sent with them (so a value a client can send
gets a 422 naming its field, or a 4xx with a reason, never a 500: ids bounded to what the
database stores, numbers finite, durations in range, text storable; a job's settings are
``jobconfig.JobConfig``) and documents them in its OpenAPI schema; the agent and the
``api`` client build their requests and read the answers with the same classes. Pydantic
and the core only: the client imports this without the ``farm`` extra.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from aidge_deploy.farm.fields import (
    MAX_ID,
    BoardName,
    CampaignId,
    ExportId,
    JobId,
    Lease,
    Line,
    Password,
    Priority,
    Seconds,
    TargetName,
    UserName,
)
from aidge_deploy.farm.jobconfig import JobConfig
from aidge_deploy.farm.states import BoardState, FailureClass, JobState

#: the name ``/api/health`` answers with: what tells a farm from another web service
SERVICE_NAME = "aidge-deploy farm"


class Model(BaseModel):
    """Unknown fields are refused in requests: a typo is an error, not a silent default."""

    model_config = ConfigDict(extra="forbid")


class Answer(BaseModel):
    """An answer of the service (a newer service may add fields: they are ignored)."""

    model_config = ConfigDict(extra="ignore")


# --- errors and service ------------------------------------------------------------------


class ErrorBody(Answer):
    message: str
    hint: str = ""
    model_config = ConfigDict(extra="allow")


class ErrorAnswer(Answer):
    """Every refusal: ``{"error": {"message", "hint", ...}}``."""

    error: ErrorBody


class Health(Answer):
    service: str = SERVICE_NAME
    status: Literal["ok"] = "ok"
    coordinator: bool
    version: str = ""


# --- users -------------------------------------------------------------------------------


class TokenRequest(Model):
    username: UserName
    password: Password
    #: seconds; capped by the service (default 12 h)
    expires_in: float | None = Field(default=None, gt=0, le=1e9, allow_inf_nan=False)


class TokenAnswer(Answer):
    access_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_at: float


class BoardView(Answer):
    name: str
    target: str
    host: str
    kind: str
    state: BoardState
    #: jobs waiting that this board may take
    queue: int
    job: int | None = None
    job_user: str | None = None
    offline_since: float | None = None
    description: str = ""
    #: who holds the board's labgrid place from outside the farm (state ``held``)
    held_by: str | None = None
    #: why it is drained (``offline: health check failed`` when its golden run failed),
    #: by whom and since when
    drain_reason: str | None = None
    drained_by: str | None = None
    drained_at: float | None = None
    #: its last health check (``farm.health``): passed | failed | pending, and when
    health: str | None = None
    health_at: float | None = None
    health_run: int | None = None
    #: the health check that drained it (its log says why)
    drain_run: int | None = None


class DrainRequest(Model):
    """Why an admin takes a board out of service (shown on the boards page)."""

    reason: Annotated[Line, Field(max_length=500)] = "drained by an admin"


class HealthRunView(Answer):
    """One golden run of a board: when, why, how it ended, its figure against its band."""

    id: int
    board: str
    trigger: str
    created_at: float
    ended_at: float | None = None
    outcome: str
    figure: float | None = None
    figure_unit: str | None = None
    figure_provenance: str | None = None
    reference: float | None = None
    band: float | None = None
    reason: str = ""
    action: str = ""
    output_job: int | None = None
    figure_job: int | None = None


class ExportView(Answer):
    id: str
    target: str
    application: str
    protocol: str
    size: int


class CampaignTag(Model):
    """The campaign a job is a cell of (``aidge-deploy campaign``): the dashboard's
    ``/campaigns`` page groups its jobs by ``id``."""

    id: CampaignId
    name: Annotated[Line, Field(max_length=100)]
    cell: Annotated[Line, Field(max_length=200)]
    #: how many of the campaign's cells run on this farm
    cells: int = Field(ge=1, le=1_000_000)
    #: this job is step ``step`` of the cell's ``steps`` farm jobs (its run, then its
    #: accuracy run): the dashboard counts the cell done once its last step is
    step: int = Field(default=1, ge=1, le=16)
    steps: int = Field(default=1, ge=1, le=16)

    @model_validator(mode="after")
    def _step_of_steps(self) -> CampaignTag:
        if self.step > self.steps:
            raise ValueError(f"step {self.step} of {self.steps}")
        return self


class SubmitRequest(Model):
    export: ExportId
    board: BoardName | None = None
    target: TargetName | None = None
    #: the measurement settings (``jobconfig.JobConfig``: bounded, finite, checked here)
    config: JobConfig = Field(default_factory=JobConfig)
    priority: Priority = 0.0
    campaign: CampaignTag | None = None
    #: at most this many runs again after an infrastructure failure (None: the farm's
    #: ``--job-retries``; more than the farm's is taken as the farm's)
    retries: Annotated[int, Field(ge=0, le=10)] | None = None


class JobError(Answer):
    message: str
    hint: str = ""
    kind: str | None = None
    type: str | None = None


class AttemptView(Answer):
    """One run of the job on a board that ended (an infrastructure failure is retried)."""

    number: int
    board: str | None = None
    agent: str | None = None
    #: done | failed | cancelled
    state: JobState
    failure_class: FailureClass | None = None
    error: str | None = None
    error_type: str | None = None
    started_at: float | None = None
    ended_at: float
    #: the job went back to the queue for another run after this one
    retried: bool = False
    #: this run's logs (an earlier run's are kept when the job is retried)
    log: str | None = None


class JobUrls(Answer):
    self: str
    events: str
    log: str
    result: str
    bundle: str


class JobView(Answer):
    id: int
    state: JobState
    stage: str = ""
    user: str | None = None
    export: str
    target: str
    requested_board: str | None = None
    board: str | None = None
    agent: str | None = None
    priority: float = 0.0
    #: UNIX time each state was entered
    times: dict[str, float] = Field(default_factory=dict)
    cancel_requested: bool = False
    #: the state the job was in when it was cancelled (queued or reserved: it never
    #: started on its board)
    cancelled_in: JobState | None = None
    deploy_seconds: float | None = None
    error: JobError | None = None
    #: whose failure it is, once it failed: infrastructure (the lab's) or user
    failure_class: FailureClass | None = None
    #: the number of its current (or last) run on a board
    attempt: int = 1
    #: its runs on boards that ended, oldest first (in a job's own view, not in lists)
    attempts: list[AttemptView] | None = None
    urls: JobUrls
    #: jobs labgrid serves first that may take this job's board (while it waits)
    queue_position: int | None = None
    #: seconds each phase took on the board's host (once the job has ended)
    phases: dict[str, float] | None = None


class EventView(Answer):
    id: int
    at: float
    kind: str
    state: str | None = None
    stage: str | None = None
    message: str = ""


class EventsPage(Answer):
    job: JobView
    events: list[EventView]


# --- agents ------------------------------------------------------------------------------


class BoardSpec(Model):
    name: BoardName
    target: TargetName
    kind: Literal["emu", "hw"] = "emu"
    description: Annotated[Line, Field(max_length=500)] = ""


class RegisterRequest(Model):
    hostname: Annotated[Line, Field(max_length=200)] = ""
    version: Annotated[Line, Field(max_length=64)] = ""
    boards: list[BoardSpec] = Field(max_length=1000)


class RegisterAnswer(Answer):
    coordinator: str
    farm: str
    heartbeat_interval: float


class Heartbeat(Model):
    running: list[JobId] = Field(default_factory=list, max_length=1000)


class HeartbeatAnswer(Answer):
    #: jobs whose owner asked to cancel them
    cancel: list[int] = Field(default_factory=list)
    #: jobs the agent runs that are no longer its own (ended, or taken away)
    stop: list[int] = Field(default_factory=list)


class JobOffer(Answer):
    id: int
    board: str
    token: str
    export: str
    target: str
    config: dict[str, Any] = Field(default_factory=dict)


class PollAnswer(Answer):
    jobs: list[JobOffer]
    #: jobs the agent runs whose owner asked to cancel them (told at once, not at the
    #: next heartbeat)
    cancel: list[int] = Field(default_factory=list)


class ClaimAnswer(Answer):
    lease: int


class StageEvent(Model):
    stage: Annotated[Line, Field(max_length=32)]
    kind: Annotated[Line, Field(max_length=16)]
    message: Annotated[Line, Field(max_length=2000)] = ""


class EventsRequest(Model):
    lease: Lease
    events: list[StageEvent] = Field(max_length=1000)


class EventsAnswer(Answer):
    cancel: bool


class FinishRequest(Model):
    lease: Lease
    #: done, failed or cancelled
    state: JobState
    error: Annotated[Line, Field(max_length=20000)] | None = None
    error_hint: Annotated[Line, Field(max_length=5000)] | None = None
    error_type: Annotated[Line, Field(max_length=64)] | None = None
    deploy_seconds: Seconds | None = None
    #: seconds each phase took on the agent's host (name -> seconds)
    phases: dict[Annotated[Line, Field(min_length=1, max_length=32)], Seconds] = Field(
        default_factory=dict, max_length=20
    )
    #: the agent has already unlocked the board and cancelled its reservation
    released: bool = False

    @field_validator("state")
    @classmethod
    def _ended(cls, state: JobState) -> JobState:
        if not state.terminal:
            raise ValueError("a job ends done, failed or cancelled")
        return state


class FinishAnswer(Answer):
    state: JobState
    already: bool


class UploadAnswer(Answer):
    size: int


__all__ = [
    "MAX_ID",
    "SERVICE_NAME",
    "Answer",
    "AttemptView",
    "BoardSpec",
    "BoardView",
    "CampaignTag",
    "ClaimAnswer",
    "DrainRequest",
    "ErrorAnswer",
    "ErrorBody",
    "EventView",
    "EventsAnswer",
    "EventsPage",
    "EventsRequest",
    "ExportView",
    "FinishAnswer",
    "FinishRequest",
    "HealthRunView",
    "Heartbeat",
    "HeartbeatAnswer",
    "JobError",
    "JobOffer",
    "JobUrls",
    "JobView",
    "Model",
    "PollAnswer",
    "RegisterAnswer",
    "RegisterRequest",
    "StageEvent",
    "SubmitRequest",
    "TokenAnswer",
    "TokenRequest",
    "UploadAnswer",
]
