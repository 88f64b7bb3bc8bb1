"""Importing this module registers every deploy target as an ``aidge_benchmark`` backend,
``aidge_deploy.<target>`` (``benchmark_backends``): ``aidge_benchmark.compute_output(
"aidge_deploy.host", model, inputs)`` and ``measure_inference_time`` then reach them."""

from __future__ import annotations

from aidge_deploy.benchmark_backends import register_backends

#: the backend names registered at import
BACKENDS = register_backends()

__all__ = ["BACKENDS"]
