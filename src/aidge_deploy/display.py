"""Figures as people read them (terminal, HTML report, tables), by the rules of ``metrics``.

Times are shown in ms, µs or ns (whichever reads best) and always to the resolution of their
timer, scaled with them; counts as integers; bytes in the binary unit they are closest to.
"""

from __future__ import annotations

from aidge_deploy.metrics import Band, format_banded, format_figure

#: display unit -> factor from milliseconds
_TIME_FACTORS = {"ms": 1.0, "µs": 1e3, "ns": 1e6}


def time_unit_for(max_ms: float) -> str:
    """The unit that shows millisecond figures up to ``max_ms`` as readable numbers."""
    if max_ms >= 1.0:
        return "ms"
    if max_ms >= 1e-3:
        return "µs"
    return "ns"


def column_time_unit(peak_ms: float, resolution_ms: float | None) -> str:
    """The unit of a column of times: readable for its largest value, never finer than its
    timer (a 1 ms tick's sub-tick readings are "<1 ms", not "<1,000 µs")."""
    return time_unit_for(max(peak_ms, resolution_ms or 0.0))


def time_text(
    value_ms: float,
    resolution_ms: float | None,
    unit: str | None = None,
    *,
    with_unit: bool = True,
    band: Band | None = None,
) -> str:
    """A time (ms) in ``unit`` (chosen from the value when None), to its resolution; an
    estimate with a band to 3 significant digits and its band."""
    shown = unit or time_unit_for(abs(value_ms))
    factor = _TIME_FACTORS[shown]
    if band is not None:
        return format_banded(value_ms * factor, shown, band, with_unit=with_unit)
    resolution = None if resolution_ms is None else resolution_ms * factor
    return format_figure(value_ms * factor, shown, resolution, with_unit=with_unit)


def figure_text(
    value: float | None,
    unit: str,
    resolution: float | None = None,
    *,
    unavailable_reason: str | None = None,
    with_unit: bool = True,
    band: Band | None = None,
) -> str:
    """Any summary figure: bytes, ratios, times and counts each in their own way (an
    estimate with its model's band)."""
    if value is None:
        return format_figure(None, unit, unavailable_reason=unavailable_reason)
    if unit == "ms":
        return time_text(float(value), resolution, with_unit=with_unit, band=band)
    if band is not None:
        return format_banded(float(value), unit, band, with_unit=with_unit)
    if unit == "B":
        return fmt_bytes(float(value)) if with_unit else f"{float(value):,.0f}"
    if unit == "ratio":
        return f"{float(value):.2%}"
    return format_figure(float(value), unit, resolution, with_unit=with_unit)


def fmt_bytes(value: float) -> str:
    """Bytes in the binary unit closest to them (4194304 -> 4 MiB), exact below 1 KiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"
