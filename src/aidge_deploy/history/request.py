"""``--history FILE``: recording one run of ``run``, ``profile`` or an agent's tool call.

Why this module exists: the CLI and the MCP server record a run the same way — the history
is opened before the run (a bad path costs nothing), the run writes a bundle in its run
folder when it was asked for none (the history records a run from its bundle), and the
record is made once the run ended. Only the words said about it differ, so they stay with
the caller.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aidge_deploy.config import DeployConfig
    from aidge_deploy.history.store import HistoryRecord
    from aidge_deploy.results import DeployResult


@dataclass(frozen=True)
class HistoryRequest:
    """Where to record a run, and under which name and source."""

    location: Path
    name: str
    source: str

    @classmethod
    def of(cls, location: Path | None, name: str, source: str) -> HistoryRequest | None:
        return None if location is None else cls(location, name, source)

    def check(self) -> None:
        """Open (or create) the history before the run: a bad path costs nothing."""
        from aidge_deploy.history.store import HistoryStore

        HistoryStore(self.location).close()

    def bundle_config(self, config: DeployConfig, run_dir: Path) -> DeployConfig:
        """The run's config, with a bundle in its run folder when it writes none."""
        if config.report_dir is not None:
            return config
        return dataclasses.replace(config, report_dir=run_dir / "bundle")

    def record(self, result: DeployResult) -> HistoryRecord:
        from aidge_deploy.history.store import HistoryStore

        with HistoryStore(self.location) as store:
            return store.record(result, self.name, board=result.farm_board, source=self.source)


__all__ = ["HistoryRequest"]
