"""Hardware-in-the-loop testing of Aidge models in pytest.

The pytest plugin (``aidge_deploy.testing.plugin``, loaded through the ``pytest11`` entry
point and inert until its options or fixtures are used) gives::

    @pytest.mark.aidge_targets("host", "mps2-an386")
    def test_latency(aidge_run, aidge_target):
        result = aidge_run("model.onnx", iterations=20)        # exported, deployed, bundled
        assert_budget(result, "latency", max=5.0)              # ms
        assert_no_regression(result)       # against --aidge-baseline / --aidge-history

and this module the assertion helpers, usable on any ``DeployResult``.
"""

from __future__ import annotations

from aidge_deploy.testing.assertions import (
    DEFAULT_THRESHOLDS,
    BaselineWarning,
    assert_budget,
    assert_no_regression,
    assert_outputs_close,
)
from aidge_deploy.testing.figures import Figure, headline_figures, result_figures

__all__ = [
    "DEFAULT_THRESHOLDS",
    "BaselineWarning",
    "Figure",
    "assert_budget",
    "assert_no_regression",
    "assert_outputs_close",
    "headline_figures",
    "result_figures",
]
