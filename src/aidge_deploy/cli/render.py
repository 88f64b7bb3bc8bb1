"""Rich rendering of results and errors for the CLI (the library itself never prints)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from aidge_deploy.display import column_time_unit, figure_text, time_text
from aidge_deploy.errors import DeployError, InternalError
from aidge_deploy.metrics import COARSE_STEPS, Metric, Provenance, format_figure
from aidge_deploy.progress import ProgressCallback, ProgressKind, ProgressUpdate

if TYPE_CHECKING:  # results imports numpy and aidge_core: not at --help time
    from aidge_deploy.power.protocol import GateReport
    from aidge_deploy.power.result import PowerResult
    from aidge_deploy.results import DeployResult

console = Console(log_path=False)
err_console = Console(stderr=True)


def follow_columns() -> None:
    """Give both consoles the width ``$COLUMNS`` says now, when it says one.

    rich reads ``$COLUMNS`` once, when a console is made (at import); a command invoked
    again in the same process with another ``COLUMNS`` (a test's ``CliRunner(env=...)``)
    would still print at the first width. Called at the start of every command.
    """
    import os

    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        for each in (console, err_console):
            each.width = int(columns)


#: what a run is, by the provenance of its counts
_PROVENANCE_LABEL = {
    Provenance.SILICON.value: "measured on target",
    Provenance.HOST.value: "measured on host",
    Provenance.EMULATED.value: "EMULATED (QEMU): instruction counts, not cycles; times estimated",
    Provenance.ESTIMATED.value: "estimated by a model",
    Provenance.STATIC.value: "static facts of the build",
}


#: exit status of a bug (a user error exits 2, or a command's own codes)
EXIT_INTERNAL = 3


def error_exit(exc: DeployError, *, user_code: int = 2, verbose: bool = False) -> typer.Exit:
    """Print ``exc`` (a traceback with ``verbose``) and return the exit to raise: 3 for an
    ``InternalError`` (its traceback kept in a log file first), ``user_code`` otherwise."""
    if verbose:
        err_console.print_exception()
    if isinstance(exc, InternalError):
        if exc.log_path is None:
            from aidge_deploy.bugreport import keep_traceback

            exc.log_path = keep_traceback(exc)
        print_error(exc)
        return typer.Exit(code=EXIT_INTERNAL)
    print_error(exc)
    return typer.Exit(code=user_code)


def print_error(exc: DeployError) -> None:
    where = f" [dim](stage {exc.stage})[/dim]" if exc.stage else ""
    err_console.print(f"[bold red]Error:[/bold red] {exc.message}{where}", highlight=False)
    if exc.log_path is not None:
        # soft_wrap: a path is never broken over lines (it must stay copyable)
        err_console.print(f"  [bold]Log:[/bold] {exc.log_path}", highlight=False, soft_wrap=True)
    if exc.hint:
        err_console.print(f"  [bold yellow]Hint:[/bold yellow] {exc.hint}", highlight=False)


@contextmanager
def progress_display(enabled: bool = True) -> Iterator[ProgressCallback]:
    """A spinner naming the running stage; yields the callback to pass to ``deploy``."""
    if not enabled:
        yield lambda update: None
        return
    with console.status("starting", spinner="dots") as status:

        def callback(update: ProgressUpdate) -> None:
            if update.kind == ProgressKind.START:
                status.update(f"[bold]{update.stage}[/bold]")
            elif update.kind == ProgressKind.STATUS and update.message:
                status.update(f"[bold]{update.stage}[/bold] — {update.message}")
            elif update.kind == ProgressKind.DONE:
                console.log(f"[green]✓[/green] {update.stage}", highlight=False)

        yield callback


def _flagged(cell: Metric | None, time_unit: str | None = None) -> str:
    """A per-layer cell as printed: to its resolution (a time in its column's
    ``time_unit``), flagged when the timer is coarse."""
    if cell is None:
        return "-"
    if cell.value is None:
        return "n/a"
    if cell.unit == "ms" and time_unit is not None:
        text = time_text(
            float(cell.value), cell.resolution, time_unit, with_unit=False, band=cell.band
        )
    else:
        text = cell.formatted(with_unit=False)
    if cell.below_resolution:
        return f"{text}*"
    return f"{text}~" if cell.coarse else text


def _latency(result: DeployResult) -> None:
    latency = result.latency
    timing = result.timing
    if latency is None or timing is None or timing.resolution_ms is None:
        return
    res = timing.resolution_ms
    unit = column_time_unit(float(latency.max), res)  # as the report's table
    table = Table(
        title=f"Latency per inference ({unit}, {timing.label}; step {time_text(res, res)})",
        title_justify="left",
    )
    for col in ("n", "mean", "median", "p90", "min", "max", "std"):
        table.add_column(col, justify="right")
    table.add_row(
        str(latency.n),
        *(
            time_text(float(getattr(latency, k)), res, unit, with_unit=False)
            for k in ("mean", "median", "p90", "min", "max", "std")
        ),
    )
    console.print(table)


def _layers(result: DeployResult) -> None:
    from aidge_deploy.profiling.layer_table import MACS, PARAMS, TIME, coverage_text, layer_table

    table_view = layer_table(result)
    if not table_view.rows:
        return
    # MACs and parameters are static facts of the export: in the report, not on the terminal
    columns = [c for c in table_view.columns if c.key not in (MACS, PARAMS)]
    # times in the unit the report uses for the column: readable for its largest value
    units = {c.key: c.unit for c in columns}
    for c in columns:
        if c.unit == "ms":
            peak = max(
                (float(r.cells[c.key].value or 0.0) for r in table_view.rows if c.key in r.cells),
                default=0.0,
            )
            units[c.key] = column_time_unit(peak, c.resolution)
    cells = [
        [_flagged(row.cells.get(c.key), units[c.key]) for c in columns] for row in table_view.rows
    ]
    names = [row.name for row in table_view.rows]
    layer_width = min(max(len("layer"), *(len(n) for n in names)), 40)
    headers, widths = [], []
    for i, column in enumerate(columns):
        values = max(len(row[i]) for row in cells)
        lines = _header_lines(column.title, units[column.key], max(values, 8))
        headers.append("\n".join(lines))
        widths.append(max(values, *(len(line) for line in lines)))
    # as many columns per table as the terminal holds; the rest in a continuation table
    # (at 80 columns a table of counters wrapped its headers illegibly and dropped the names)
    chunks: list[list[int]] = [[]]
    room = console.width - (layer_width + 4)
    for i, width in enumerate(widths):
        if chunks[-1] and sum(widths[j] + 3 for j in chunks[-1]) + width + 3 > room:
            chunks.append([])
        chunks[-1].append(i)
    for part, chunk in enumerate(chunks):
        title = "Per-layer profile" + (f" (continued, {part + 1}/{len(chunks)})" if part else "")
        table = Table(title=title, title_justify="left")
        table.add_column("layer", no_wrap=layer_width < 40, overflow="fold", min_width=layer_width)
        for i in chunk:
            table.add_column(headers[i], justify="right", no_wrap=True, min_width=widths[i])
        for name, texts in zip(names, cells, strict=True):
            table.add_row(name, *(texts[i] for i in chunk))
        console.print(table)
    time_column = table_view.column(TIME)
    if time_column is not None and time_column.resolution is not None:
        console.print(
            f"[dim]times per call, {result.timing.label if result.timing else ''}, to the "
            f"timer's step ({time_text(time_column.resolution, time_column.resolution)}); "
            f"~ fewer than {COARSE_STEPS} steps, * less than one (no share, no time/MAC)[/dim]",
            highlight=False,
        )
    coverage = coverage_text(table_view.coverage)
    if coverage is not None:
        console.print(f"[dim]{coverage}[/dim]", highlight=False)


def _counters(result: DeployResult) -> None:
    """The figure of every counter asked for, per inference (unavailable ones with their
    reason), then how each pass reduced its samples."""
    counters = result.counter_metrics()
    if not counters:
        return
    table = Table(title="Counters per inference", title_justify="left")
    table.add_column("counter", no_wrap=True)
    table.add_column("value", justify="right", overflow="fold")
    table.add_column("provenance")
    for metric in counters:
        value = shown_figure(metric) if metric.value is not None else "unavailable"
        table.add_row(metric.name, value, metric.provenance.value)
    console.print(table)
    for metric in counters:  # the reasons, unwrapped by a narrow column
        if metric.value is None:
            console.print(f"{metric.name}: {metric.formatted()}", highlight=False)
    for counter_pass in result.metrics.get("counter_passes") or ():
        if counter_pass.get("basis"):
            console.print(
                f"[dim]pass {counter_pass['name']} ({', '.join(counter_pass['counters'])}): "
                f"{counter_pass['basis']}[/dim]",
                highlight=False,
            )


def _header_lines(title: str, unit: str, width: int) -> list[str]:
    """A column header one word per line (numbers, never wrapped, set the widths); words
    longer than ``width`` break after their hyphens (counter names: ``emu-branches-taken``)."""
    lines: list[str] = []
    for word in [*title.split(), f"({unit})"]:
        if len(word) > width and "-" in word.strip("()"):
            parts = word.split("-")
            lines += [f"{p}-" for p in parts[:-1]] + [parts[-1]]
        else:
            lines.append(word)
    return lines


def shown_figure(metric: Metric) -> str:
    """A figure as the terminal and the report show it: a time in the unit that reads best
    for it (ms, µs or ns), to its resolution; anything else as ``Metric.formatted``."""
    if metric.unit == "ms" and metric.value is not None:
        return figure_text(float(metric.value), "ms", metric.resolution, band=metric.band)
    return metric.formatted()


def _headline(result: DeployResult) -> None:
    """The run's headline figures, each with its provenance (instructions first on an
    emulated board: the count is the primary figure, the time an estimate from it)."""
    cycles = result.metric(str(result.metrics.get("cycles_name") or "cycles"))
    figures = (
        cycles,
        result.metric("estimated_cycles"),
        result.metric("latency"),
        result.metric("mlperf_latency"),
    )
    for metric in figures:
        if metric is None:
            continue
        console.print(
            f"[bold]{metric.name.replace('_', ' ')}[/bold]: {shown_figure(metric)} "
            f"[dim]({metric.description}; {metric.provenance.value})[/dim]",
            highlight=False,
        )
    model = result.metrics.get("timing_model")
    if model and model.get("assumptions") and not model.get("unavailable"):
        console.print(
            f"[dim]{model['model']}: its assumptions are in the report and in "
            "`aidge-deploy profile --help` (--timing)[/dim]",
            highlight=False,
        )


def print_result(result: DeployResult) -> None:
    prov = result.provenance.value  # declared by the target
    console.print(
        f"[bold]Target[/bold] {result.target} ({result.backend}) · protocol {result.protocol} · "
        f"[italic]{_PROVENANCE_LABEL.get(prov, prov)}[/italic]",
        highlight=False,
    )
    if result.timing is not None:
        console.print(f"[dim]times: {result.timing.source}[/dim]", highlight=False)
    _headline(result)
    _latency(result)
    _layers(result)
    _counters(result)
    if result.accuracy is not None:
        console.print(f"[bold]Accuracy on target:[/bold] {result.accuracy:.2%}")
    if isinstance(result.output, list):
        for index, values in enumerate(result.output):
            preview = " ".join(f"{v:.6g}" for v in values[:10])
            more = " …" if len(values) > 10 else ""
            console.print(
                f"output[{index}] ({len(values)} values): {preview}{more}", highlight=False
            )
    if result.memory_peak_bytes is not None:
        per = ", ".join(f"mem_{i}={v:,} B" for i, v in enumerate(result.memory_peak_bytes))
        console.print(
            f"[bold]Activation memory (planned, static):[/bold] {int(result.memory_peak_bytes):,} B"
            f" ({per})"
        )
    rss = result.metrics.get("peak_rss_bytes")
    if rss:
        console.print(f"[bold]Peak RSS:[/bold] {rss / 1024:,.0f} KiB")
    binary = result.metrics.get("binary")
    if binary:
        if binary.get("flash_capacity") is not None:
            what = f"flash {binary['flash_bytes']:,} B, static RAM {binary['ram_bytes']:,} B"
        else:
            what = (
                f"program image {binary['flash_bytes']:,} B, static data {binary['ram_bytes']:,} B"
            )
        console.print(f"[bold]Binary (static):[/bold] {what}")
    if result.log_path is not None:
        console.print(f"[dim]Log: {result.log_path}[/dim]", highlight=False, soft_wrap=True)
    if result.power is not None:
        print_power(result)
    if result.report_dir is not None:
        console.print(f"[dim]Report: {result.report_dir}[/dim]", highlight=False, soft_wrap=True)


#: the exit status of a run (or ``power analyse``) whose power figures are invalid
EXIT_POWER_INVALID = 5


def print_power(result: DeployResult) -> None:
    """The power figures of a run (``print_power_result``)."""
    if result.power is not None:
        shown = {layer.name for layer in result.layers if layer.energy_uj is not None}
        print_power_result(result.power, shown)


def print_power_result(power: PowerResult, shown: set[str] | frozenset[str] = frozenset()) -> None:
    """The power figures, each with its provenance; estimates say so, with their uncertainty;
    what the gate detector found; the issues; and whether the figures are invalid.
    ``shown``: the layers whose energy the per-layer table printed already."""
    prov = power.provenance
    window = power.window
    factor = window.uncertainty_factor if window else None
    label = prov.value.upper() + (f", model uncertainty ×/÷{factor:g}" if factor else "")
    if power.invalid:
        label = f"{prov.value} monitor; INVALID capture: no figure published"
    table = Table(title=f"Power — {power.source} ({label})", title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("provenance")
    for metric in power.metrics():
        table.add_row(
            metric.name.replace("_", " "),
            format_figure(metric.value, metric.unit, unavailable_reason=metric.unavailable_reason),
            # a figure that does not exist has no provenance to show
            metric.provenance.value if metric.value is not None else "—",
        )
    console.print(table)
    layer_energy = power.published_layer_energy_uj
    if layer_energy:
        # the per-layer table shows each layer's energy already: its sum here, and a table
        # only for layers that table does not show
        if shown:
            total = sum(v for name, v in layer_energy.items() if name in shown)
            console.print(
                f"[bold]Energy per layer ({prov.value}):[/bold] the energy/call column of the "
                f"per-layer table; the layers add up to {total:.4g} uJ per inference",
                highlight=False,
            )
        rest = {n: v for n, v in layer_energy.items() if n not in shown}
        if rest:
            layers = Table(title=f"Energy per layer ({prov.value})", title_justify="left")
            layers.add_column("layer")
            layers.add_column("µJ per call", justify="right")
            for name, value in rest.items():
                layers.add_row(name, f"{value:.4g}")
            console.print(layers)
    # what the detector saw, in words (an invalid capture's figures stay out of the table)
    gate = power.gate or (power.capture.gate if power.capture else None)
    if gate is not None:
        console.print(
            f"[bold]Gate {gate.gate_input}:[/bold] {gate_sentence(gate)}", highlight=False
        )
    for issue in power.issues:
        entry = issue.as_dict()
        color = "red" if entry["severity"] == "error" else "yellow"
        console.print(f"[{color}]{entry['code']}[/{color}]: {issue.message}", highlight=False)
    if power.invalid:
        console.print(
            "[bold red]The power figures are invalid[/bold red] (an issue above is an error): "
            f"exit status {EXIT_POWER_INVALID}.",
            highlight=False,
        )


def gate_sentence(gate: GateReport) -> str:
    """What the gate detector found, in one sentence (every edge is in summary.json)."""
    chosen = (
        f"window = pulse {gate.chosen + 1} ({gate.selection})"
        if gate.chosen is not None
        else "no window"
    )
    widths = ", ".join(f"{p.width_s:.6g} s" for p in gate.pulses[:5])
    return (
        f"{gate.edges} level changes; {gate.glitch_count} glitch(es) ignored, "
        f"{gate.dropout_count} dropout(s) bridged; {gate.pulse_count} pulse(s)"
        + (f" ({widths}{', ...' if gate.pulse_count > 5 else ''})" if widths else "")
        + f"; {chosen}. Limits: {gate.settings_basis}."
    )
