"""``aidge-deploy boards scan``: the probes and serial ports of this machine, paired, as a lab file."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import socket
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from aidge_deploy.cli.render import console, print_error
from aidge_deploy.errors import ConfigError

if TYPE_CHECKING:
    from aidge_deploy.labscan import ScanResult

app = typer.Typer(help="The boards attached to this machine.", no_args_is_help=True)


def _known_targets() -> tuple[list[str], list[str]]:
    """Registered Aidge hardware targets, and the emulated boards this machine can run."""
    from aidge_deploy.modelexport import load_plugins

    load_plugins()
    import aidge_core

    import aidge_qemu_boards

    emulated = (
        [b.name for b in aidge_qemu_boards.list_boards()]
        if shutil.which(aidge_qemu_boards.QEMU_BINARY)
        else []
    )
    return list(aidge_core.hw_model.list_registered_targets()), emulated


@app.command()
def scan(
    write: Annotated[
        Path | None, typer.Option("--write", help="Write a lab file (YAML) to edit.")
    ] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing --write file.")] = False,
    emulated: Annotated[
        bool, typer.Option(help="Add the emulated (QEMU) boards this machine can run.")
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the scan as JSON.")] = False,
) -> None:
    """List debug probes (pyOCD) and serial ports (pyserial), pair them by USB serial number."""
    from aidge_deploy.labscan import lab_file_text, lab_from_scan
    from aidge_deploy.labscan import scan as do_scan

    if write is not None and write.exists() and not overwrite:
        print_error(
            ConfigError(f"{write} exists", hint="Pass --overwrite to replace it, or another path.")
        )
        raise typer.Exit(code=2)
    result = do_scan()
    if as_json:
        doc = {
            "probes": [asdict(p) for p in result.probes],
            "ports": [asdict(p) for p in result.ports],
            "boards": [
                {"probe": asdict(b.probe), "ports": [p.device for p in b.ports]}
                for b in result.boards
            ],
            "unpaired_ports": [p.device for p in result.unpaired_ports],
            "problems": list(result.problems),
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        _print_scan(result)
    if write is None:
        return
    known, qemu = _known_targets()
    lab = lab_from_scan(result, known, qemu if emulated else ())
    when = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    try:
        write.parent.mkdir(parents=True, exist_ok=True)
        write.write_text(lab_file_text(result, lab, socket.gethostname(), when), encoding="utf-8")
    except OSError as exc:
        print_error(ConfigError(f"Cannot write {write}: {exc.strerror}"))
        raise typer.Exit(code=2) from None
    if not as_json:
        console.print(
            f"Wrote {write} ({len(lab.boards)} boards): edit it, then pass it as "
            "--aidge-lab to pytest.",
            highlight=False,
        )


def _print_scan(result: ScanResult) -> None:
    for problem in result.problems:
        console.print(f"[yellow]Warning:[/yellow] {problem}", highlight=False)
    if result.empty:
        console.print(
            "No boards attached: pyOCD sees no debug probe and there is no USB serial port "
            "on this machine.",
            highlight=False,
        )
        if result.other_ports:
            names = ", ".join(p.device for p in result.other_ports)
            console.print(f"(Ignored built-in serial ports: {names}.)", highlight=False)
        console.print(
            "Emulated boards need none: `aidge-deploy targets` lists them.", highlight=False
        )
        return
    if result.boards:
        console.print("[bold]Boards[/bold] (a probe and its own serial port, by USB serial number)")
    else:
        console.print("No debug probe attached.")
    for board in result.boards:
        probe = board.probe
        what = " ".join(p for p in (probe.vendor, probe.product) if p)
        head = f"{probe.board_name}: {what}" if probe.board_name else what
        console.print(f"  {head}, probe {probe.unique_id}", soft_wrap=True, highlight=False)
        uart = board.uart
        if uart is None:
            console.print("    UART: none (the probe has no CDC port)", highlight=False)
            continue
        link = f" = {uart.by_id}" if uart.by_id else ""
        console.print(f"    UART: {uart.device}{link}", soft_wrap=True, highlight=False)
        for other in board.ports[1:]:
            console.print(f"    other port: {other.device}", soft_wrap=True, highlight=False)
    if result.unpaired_ports:
        console.print("[bold]USB serial ports of no probe[/bold]")
        for port in result.unpaired_ports:
            console.print(f"  {port.label()}, USB {port.usb_id}", soft_wrap=True, highlight=False)
