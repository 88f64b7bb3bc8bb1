"""The results history: every recorded run of a model on a target, across commits.

``HistoryStore`` (SQLAlchemy: a SQLite file by default, a PostgreSQL URL accepted) records
runs by their ``RunIdentity`` with every figure, its unit and provenance, the
``Comparability`` facts and the user's commit and branch (``VcsInfo``). ``gate`` judges a
new result against the earlier ones of its identity; ``regression`` says when a series
stepped; ``exports`` writes Bencher's BMF and github-action-benchmark's JSON; ``chart``
draws a series per metric across commits as an offline HTML page.

Recording a run from code::

    from aidge_deploy.history import HistoryStore, RunIdentity

    with HistoryStore("results.db") as history:
        history.record(result, RunIdentity("kws-int8", "mps2-an386", dtype="int8"),
                       source="campaign")
"""

from __future__ import annotations

from aidge_deploy.history.identity import BundleFacts, Comparability, RunIdentity, bundle_facts
from aidge_deploy.history.store import HistoryRecord, HistoryStore, SeriesPoint, database_url
from aidge_deploy.history.vcs import VcsInfo, detect_vcs

__all__ = [
    "BundleFacts",
    "Comparability",
    "HistoryRecord",
    "HistoryStore",
    "RunIdentity",
    "SeriesPoint",
    "VcsInfo",
    "bundle_facts",
    "database_url",
    "detect_vcs",
]
