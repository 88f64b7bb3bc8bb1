"""The user's commit and branch a result belongs to: from the CI's variables, else from git.

A history is charted across commits, so each record carries the commit of the project under
test (not of aidge-deploy) and its branch. In CI the checkout is often detached or shallow,
so the CI's own variables come first: GitHub Actions (``GITHUB_SHA``, ``GITHUB_HEAD_REF``
for a pull request, else ``GITHUB_REF_NAME``) and GitLab CI (``CI_COMMIT_SHA``,
``CI_MERGE_REQUEST_SOURCE_BRANCH_NAME``, ``CI_COMMIT_BRANCH`` or ``CI_COMMIT_REF_NAME``,
``CI_COMMIT_TIMESTAMP``). Elsewhere ``git`` is asked in the project's folder. A folder that
is not a repository (or a machine without git) gives an empty ``VcsInfo``: a result is
still recorded, without a commit.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

#: how long a git query may take (a repository on a slow network file system)
GIT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class VcsInfo:
    """Where in the user's project history a result was measured."""

    commit: str | None = None
    branch: str | None = None
    #: the CI system that ran it (``github-actions``, ``gitlab-ci``), None outside CI
    ci: str | None = None
    #: the commit's time (UNIX seconds), when known: it orders a chart's commits
    commit_time: float | None = None
    #: uncommitted changes to tracked files (None when unknown, e.g. from CI variables)
    dirty: bool | None = None

    @property
    def short(self) -> str:
        return (self.commit or "")[:10] + ("+" if self.dirty else "")


def _git(args: list[str], cwd: Path) -> str | None:
    git = shutil.which("git")
    if git is None:
        return None
    try:
        proc = subprocess.run(
            [git, *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def _iso_time(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def from_git(cwd: Path) -> VcsInfo:
    commit = _git(["rev-parse", "HEAD"], cwd)
    if commit is None:
        return VcsInfo()
    branch = _git(["rev-parse", "--abbrev-ref", "HEAD"], cwd)
    when = _git(["show", "-s", "--format=%ct", "HEAD"], cwd)
    status = _git(["status", "--porcelain", "--untracked-files=no"], cwd)
    return VcsInfo(
        commit=commit,
        branch=None if branch in (None, "HEAD") else branch,
        commit_time=float(when) if when and when.isdigit() else None,
        dirty=None if status is None else bool(status),
    )


def detect_vcs(cwd: Path | None = None, env: Mapping[str, str] | None = None) -> VcsInfo:
    """The commit and branch of the project in ``cwd`` (default: the working folder)."""
    env = os.environ if env is None else env
    folder = Path.cwd() if cwd is None else Path(cwd)
    if env.get("GITHUB_ACTIONS") == "true" and env.get("GITHUB_SHA"):
        local = from_git(folder)
        return VcsInfo(
            commit=env["GITHUB_SHA"],
            branch=env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME") or None,
            ci="github-actions",
            commit_time=local.commit_time if local.commit == env["GITHUB_SHA"] else None,
        )
    if env.get("GITLAB_CI") == "true" and env.get("CI_COMMIT_SHA"):
        return VcsInfo(
            commit=env["CI_COMMIT_SHA"],
            branch=env.get("CI_MERGE_REQUEST_SOURCE_BRANCH_NAME")
            or env.get("CI_COMMIT_BRANCH")
            or env.get("CI_COMMIT_REF_NAME")
            or None,
            ci="gitlab-ci",
            commit_time=_iso_time(env.get("CI_COMMIT_TIMESTAMP")),
        )
    return from_git(folder)
