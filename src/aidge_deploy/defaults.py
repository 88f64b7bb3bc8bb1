"""Default limits shared by the library and the command line.

A leaf module (no imports): ``aidge-deploy --help`` shows these defaults and must not import
``aidge_core`` (``config.py`` does) to learn them.
"""

from __future__ import annotations

#: how long one run of the program on the target may take (each counter pass is one run);
#: ``DeployConfig.run_timeout`` and the ``--timeout`` of ``run`` and ``profile``
DEFAULT_RUN_TIMEOUT_S = 300.0

#: CPU priority (nice value) of a farm job's runner and all it starts: the agent's
#: ``--job-nice``. A job's builds and emulators take every CPU they can get; on a host
#: that also runs the service (``farm up``) or people's work, status requests, heartbeats
#: and labgrid waited behind them. No figure depends on the agent host's speed: boards
#: measure their own cycles, QEMU counts instructions.
DEFAULT_JOB_NICE = 10
