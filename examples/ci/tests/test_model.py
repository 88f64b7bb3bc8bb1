"""The model's checks, on every target of the lab."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from aidge_deploy.testing import assert_budget, assert_no_regression, assert_outputs_close

TARGETS = ("host", "mps2-an386")


@pytest.mark.aidge_targets(*TARGETS)
def test_latency_and_memory_budgets(aidge_run, aidge_target, model):
    result = aidge_run(model, iterations=5)
    assert_budget(result, "latency", max=50.0)  # ms per inference
    # a microcontroller's firmware is in flash; a host program's size is its image
    assert_budget(result, "image_bytes" if aidge_target == "host" else "flash_bytes", max=512 * 1024)
    if aidge_target != "host":
        # emulated boards count instructions, deterministically
        assert_budget(result, "emulated_instructions", max=500_000)
    # against the earlier runs of this test on this target (--aidge-history or
    # --aidge-baseline); a changed model is what this compares
    assert_no_regression(result)


@pytest.mark.aidge_targets(*TARGETS)
def test_outputs_match_the_onnx_model(aidge_run, model):
    x = np.random.default_rng(0).uniform(-1, 1, (1, 32)).astype(np.float32)
    result = aidge_run(model, kind="output", inputs=[x])
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    assert_outputs_close(result, session.run(None, {"x": x}), atol=1e-5, rtol=1e-4)
