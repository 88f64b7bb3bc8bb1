"""Default limits shared by the library and the command line.

A leaf module (no imports): ``aidge-deploy --help`` shows these defaults and must not import
``aidge_core`` (``config.py`` does) to learn them.
"""

from __future__ import annotations

#: how long one run of the program on the target may take (each counter pass is one run);
#: ``DeployConfig.run_timeout`` and the ``--timeout`` of ``run`` and ``profile``
DEFAULT_RUN_TIMEOUT_S = 300.0
