"""Read listings captured on real machines (``tests/data/lab_scan/captured``) into the
``ProbeInfo``/``PortInfo`` that ``labscan.list_probes``/``list_ports`` build from pyOCD and
pyserial on a machine with boards.

The captures are the text the tools print (``pyocd list``, ``python -m
serial.tools.list_ports -v``, ``mbedls -j``), kept verbatim as their users published them;
these readers turn that text back into the fields the printing came from.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from aidge_deploy.labscan import PortInfo, ProbeInfo

CAPTURED = Path(__file__).parent / "data" / "lab_scan" / "captured"

_ROW = re.compile(
    r"^\s+(\d+)\s{2,}(?P<probe>.+?)\s{2,}(?P<uid>[0-9A-Za-z]+)(?:\s{2,}(?P<target>.+?))?\s*$"
)
_BRACKET = re.compile(r"^(?P<name>.+?)\s+\[(?P<target>[^\]]+)\]$")


def parse_pyocd_list(text: str) -> list[ProbeInfo]:
    """``pyocd list``: the table of pyOCD 0.2x (``Probe``, ``[target]`` in brackets) and of
    0.3x (``Probe/Board``, a ``Target`` column, ``n/a`` when the probe names none)."""
    probes = []
    for line in text.splitlines():
        match = _ROW.match(line)
        if match is None:
            continue
        name = match["probe"].strip()
        target = match["target"]
        board = None
        bracket = _BRACKET.match(name)
        if bracket is not None:  # pyOCD 0.2x: "FRDM-K64F [k64f]" is the board and its target
            board, name, target = bracket["name"], bracket["name"], bracket["target"]
        if target is not None:
            target = target.replace("✔︎", "").replace("✖︎", "").strip()
            target = None if target in ("", "n/a") else target
        # the column is pyOCD's probe description: vendor and product are not told apart
        probes.append(
            ProbeInfo(
                unique_id=match["uid"],
                product=name,
                board_name=board,
                pyocd_target=target,
            )
        )
    return probes


_HWID = re.compile(
    r"USB VID:PID=(?P<vid>[0-9A-Fa-f]{4}):(?P<pid>[0-9A-Fa-f]{4})"
    r"(?: SER=(?P<ser>\S*))?(?: LOCATION=(?P<loc>\S+))?"
)


def parse_list_ports_v(text: str) -> list[PortInfo]:
    """``python -m serial.tools.list_ports -v``: a device line, then ``desc:`` and ``hwid:``
    (``USB VID:PID=vvvv:pppp SER=... LOCATION=...`` for USB ports, anything else for the
    others)."""
    ports: list[PortInfo] = []
    device: str | None = None
    desc: str | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped or stripped.endswith("ports found") or stripped.startswith(("PS ", "$ ")):
            continue
        if not raw.startswith((" ", "\t")):
            device, desc = stripped, None
        elif stripped.startswith("desc:"):
            desc = stripped[len("desc:") :].strip()
        elif stripped.startswith("hwid:") and device is not None:
            hwid = stripped[len("hwid:") :].strip()
            match = _HWID.search(hwid)
            if match is None:
                ports.append(PortInfo(device=device, product=desc))
            else:
                ports.append(
                    PortInfo(
                        device=device,
                        vid=int(match["vid"], 16),
                        pid=int(match["pid"], 16),
                        serial_number=match["ser"] or None,
                        product=desc,
                        location=match["loc"],
                    )
                )
            device = None
    return ports


def mbedls_listing(text: str) -> tuple[list[ProbeInfo], list[PortInfo]]:
    """``mbedls -j``: a DAPLink board with its own serial port, as mbed-ls found them on
    one machine. DAPLink's unique id is its USB serial number (``target_id_usb_id``), which
    pyOCD reports as the probe's unique id and the OS as the CDC port's serial number."""
    probes, ports = [], []
    for board in json.loads(text):
        usb_serial = board["target_id_usb_id"]
        probes.append(
            ProbeInfo(
                unique_id=board["daplink_unique_id"],
                vendor="ARM",
                product="DAPLink CMSIS-DAP",
                board_name=board["platform_name"],
            )
        )
        ports.append(
            PortInfo(
                device=board["serial_port"],
                vid=0x0D28,  # DAPLink's VID:PID (pyOCD's udev rules)
                pid=0x0204,
                serial_number=usb_serial,
                product="mbed Serial Port",
            )
        )
    return probes, ports


def captured(name: str) -> str:
    return (CAPTURED / name).read_text(encoding="utf-8")
