"""Rich rendering of results and errors for the CLI (the library itself never prints)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from aidge_deploy.errors import DeployError
from aidge_deploy.progress import ProgressCallback, ProgressKind, ProgressUpdate

if TYPE_CHECKING:  # results imports numpy and aidge_core: not at --help time
    from aidge_deploy.results import DeployResult

console = Console(log_path=False)
err_console = Console(stderr=True)

#: provenance value -> how the result line labels it
_PROVENANCE_LABEL = {
    "silicon": "measured on target",
    "host": "measured on host",
    "emulated": "EMULATED (QEMU icount, CPI=1 instruction counts, not cycle-accurate)",
}


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


def print_result(result: DeployResult) -> None:
    prov = str(result.metrics.get("provenance", "host"))
    console.print(
        f"[bold]Target[/bold] {result.target} ({result.backend}) · protocol {result.protocol} · "
        f"[italic]{_PROVENANCE_LABEL.get(prov, prov)}[/italic]",
        highlight=False,
    )
    latency = result.latency
    if latency is not None:
        table = Table(title=f"Latency per inference ({latency.unit})", title_justify="left")
        for col in ("n", "mean", "median", "p90", "min", "max", "std"):
            table.add_column(col, justify="right")
        table.add_row(
            str(latency.n),
            *(f"{getattr(latency, k):.6f}" for k in ("mean", "median", "p90", "min", "max", "std")),
        )
        console.print(table)
    cycles_name = str(result.metrics.get("cycles_name", "cycles")).replace("_", " ")
    if result.metrics.get("cycles"):
        values = result.metrics["cycles"]
        console.print(
            f"{cycles_name} per inference (median of {len(values)}): {sorted(values)[len(values) // 2]}"
        )
    if result.layers:
        counter_names: list[str] = []
        for layer in result.layers:
            counter_names += [c for c in layer.counters if c not in counter_names]
        table = Table(title="Per-layer profile", title_justify="left")
        table.add_column("layer")
        table.add_column("time (ms/call)", justify="right")
        for name in counter_names:
            table.add_column(name.replace("_", " "), justify="right")
        total = sum(layer.time_ms or 0.0 for layer in result.layers)
        table.add_column("share", justify="right")
        with_macs = any(layer.macs for layer in result.layers)
        if with_macs:
            table.add_column("MACs", justify="right")
            table.add_column("ns/MAC", justify="right")
        for layer in result.layers:
            share = f"{(layer.time_ms or 0) / total:.0%}" if total > 0 else "-"
            table.add_row(
                layer.name,
                "-" if layer.time_ms is None else f"{layer.time_ms:.6f}",
                *(
                    f"{layer.counters[c]:.0f}" if c in layer.counters else "-"
                    for c in counter_names
                ),
                share,
                *(
                    (
                        str(layer.macs or 0),
                        "-" if layer.ns_per_mac is None else f"{layer.ns_per_mac:.3g}",
                    )
                    if with_macs
                    else ()
                ),
            )
        console.print(table)
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
        per = ", ".join(f"mem_{i}={v} B" for i, v in enumerate(result.memory_peak_bytes))
        console.print(f"[bold]Activation memory:[/bold] {int(result.memory_peak_bytes)} B ({per})")
    rss = result.metrics.get("peak_rss_bytes")
    if rss:
        console.print(f"[bold]Peak RSS:[/bold] {rss / 1024:.0f} KiB")
    binary = result.metrics.get("binary")
    if binary:
        console.print(
            f"[bold]Binary:[/bold] flash {binary['flash_bytes']} B, RAM {binary['ram_bytes']} B"
        )
    if result.log_path is not None:
        console.print(f"[dim]Log: {result.log_path}[/dim]", highlight=False, soft_wrap=True)
    if result.power is not None:
        print_power(result)
    if result.report_dir is not None:
        console.print(f"[dim]Report: {result.report_dir}[/dim]", highlight=False, soft_wrap=True)


def print_power(result: DeployResult) -> None:
    """The power figures, each with its provenance; estimates say so, with their uncertainty."""
    from aidge_deploy.metrics import format_figure

    power = result.power
    if power is None:
        return
    prov = power.provenance
    factor = power.capture.uncertainty_factor if power.capture else None
    label = prov.value.upper() + (f", model uncertainty ×/÷{factor:g}" if factor else "")
    table = Table(title=f"Power — {power.source} ({label})", title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("provenance")
    for metric in power.metrics():
        table.add_row(
            metric.name.replace("_", " "),
            format_figure(metric.value, metric.unit, unavailable_reason=metric.unavailable_reason),
            metric.provenance.value,
        )
    console.print(table)
    if power.layer_energy_uj:
        layers = Table(title=f"Energy per layer ({prov.value})", title_justify="left")
        layers.add_column("layer")
        layers.add_column("µJ per call", justify="right")
        for name, value in power.layer_energy_uj.items():
            layers.add_row(name, f"{value:.4g}")
        console.print(layers)
    for issue in power.issues:
        code = issue.as_dict()["code"]
        console.print(f"[yellow]{code}[/yellow]: {issue.message}", highlight=False)
