"""Campaigns: many models x many targets x option axes, run side by side, one report.

``spec`` reads the campaign file, ``plan`` resolves it into cells keyed by content,
``cell`` runs one cell (what ``profile`` does, plus accuracy), ``runner`` runs the missing
cells and writes the report (``tables``, ``html``), ``progress`` is the live state the CLI
and the farm's dashboard show. ``aidge-deploy profile MODEL --targets a,b,c`` is a campaign
of one model.
"""

from __future__ import annotations

__all__: list[str] = []
