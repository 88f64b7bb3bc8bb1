"""What the agent's fork server imports once (``forkserver``): the deploy path — Aidge, NumPy,
the pipeline, every built-in target — so that each job's runner, forked from it, starts
its deploy at once instead of spending seconds on imports."""

from __future__ import annotations

import aidge_deploy.api
import aidge_deploy.farm.jobconfig
import aidge_deploy.farm.jobprocess
import aidge_deploy.farm.resultcodec
import aidge_deploy.runcontrol  # noqa: F401
from aidge_deploy.registry import registered_targets

registered_targets()  # the targets' modules and their plugins
