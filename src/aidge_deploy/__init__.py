"""aidge-deploy: build, transfer or flash, run and measure Aidge exports on real targets."""

from __future__ import annotations

__version__ = "0.1.0"
