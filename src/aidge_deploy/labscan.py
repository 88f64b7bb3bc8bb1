"""What is plugged into this machine: debug probes, serial ports, and which belong together.

``aidge-deploy boards scan`` lists the probes pyOCD sees and the serial ports pyserial sees,
pairs each probe with its own CDC (virtual COM) port by **USB serial number** — a probe and
its UART share one USB device, so they share its serial number, whereas ``ttyACM`` indices
change with plug order — and writes a lab file (``aidge_deploy.lab``) to edit.

Listing is separated from pairing: ``list_probes``/``list_ports`` read the machine,
``pair`` and ``lab_from_scan`` are pure functions of those listings, so they are tested on
listings of real machines.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aidge_deploy.lab import FlashMethod, LabBoard, LabMap, ProbeSpec, SerialSpec

log = logging.getLogger("aidge_deploy")

BY_ID_DIR = Path("/dev/serial/by-id")


@dataclass(frozen=True)
class ProbeInfo:
    """A debug probe as pyOCD lists it."""

    unique_id: str
    vendor: str = ""
    product: str = ""
    #: the board pyOCD recognises behind the probe (DAPLink / ST-LINK board ids), if any
    board_name: str | None = None
    #: pyOCD's target type for that board (``--pyocd-target``), if known
    pyocd_target: str | None = None

    @property
    def flash_method(self) -> FlashMethod:
        """How aidge-deploy flashes through it: J-Links through their own GDB server."""
        text = f"{self.vendor} {self.product}".lower()
        return FlashMethod.JLINK if "segger" in text or "j-link" in text else FlashMethod.PYOCD

    def label(self) -> str:
        name = " ".join(p for p in (self.vendor, self.product) if p) or "probe"
        return f"{name} ({self.board_name})" if self.board_name else name


@dataclass(frozen=True)
class PortInfo:
    """A serial port as pyserial's ``list_ports`` reports it (plus its by-id link)."""

    device: str
    vid: int | None = None
    pid: int | None = None
    serial_number: str | None = None
    manufacturer: str | None = None
    product: str | None = None
    interface: str | None = None
    location: str | None = None
    #: ``/dev/serial/by-id/...`` link to the device, when udev made one
    by_id: str | None = None

    @property
    def is_usb(self) -> bool:
        return self.vid is not None

    @property
    def usb_id(self) -> str:
        return "" if self.vid is None else f"{self.vid:04X}:{(self.pid or 0):04X}"

    @property
    def interface_number(self) -> int:
        """USB interface number from the location (``1-1.3:1.2`` -> 2); 0 if unknown."""
        if self.location and ":" in self.location:
            tail = self.location.rsplit(":", 1)[1]
            match = re.search(r"\.(\d+)$", tail)
            if match:
                return int(match.group(1))
        return 0

    def label(self) -> str:
        what = " ".join(p for p in (self.manufacturer, self.product) if p) or "serial port"
        sn = f", sn {self.serial_number}" if self.serial_number else ""
        return f"{self.device} ({what}{sn})"


@dataclass(frozen=True)
class BoardCandidate:
    """A probe with the CDC ports of the same USB device (first: the board's UART)."""

    probe: ProbeInfo
    ports: tuple[PortInfo, ...] = ()

    @property
    def uart(self) -> PortInfo | None:
        return self.ports[0] if self.ports else None


@dataclass(frozen=True)
class ScanResult:
    """Everything found on this machine, paired."""

    probes: tuple[ProbeInfo, ...]
    ports: tuple[PortInfo, ...]
    boards: tuple[BoardCandidate, ...] = ()
    #: USB serial ports of no probe (a separate USB-UART adapter, a modem, ...)
    unpaired_ports: tuple[PortInfo, ...] = ()
    #: built-in or platform ports with no USB device behind them (``/dev/ttyS0``)
    other_ports: tuple[PortInfo, ...] = ()
    #: why a listing could not be made (pyOCD backend failure, ...)
    problems: tuple[str, ...] = field(default_factory=tuple)

    @property
    def empty(self) -> bool:
        """No probe and no USB serial port: nothing of a lab is attached."""
        return not self.probes and not any(p.is_usb for p in self.ports)


def normalize_serial(value: str | None) -> str:
    """USB serial numbers as compared: case, blanks and leading zeros ignored.

    J-Link probes are the reason for the zeros: pyOCD reports the J-Link serial as an
    integer (``683714251``), the CDC port's USB descriptor as ``000683714251``.
    """
    if not value:
        return ""
    return value.strip().upper().lstrip("0")


def pair(probes: Iterable[ProbeInfo], ports: Iterable[PortInfo]) -> ScanResult:
    """Pair every probe with the USB serial ports that share its serial number."""
    probe_list = tuple(probes)
    port_list = tuple(ports)
    taken: set[str] = set()
    boards = []
    for probe in probe_list:
        key = normalize_serial(probe.unique_id)
        own = sorted(
            (p for p in port_list if p.is_usb and key and normalize_serial(p.serial_number) == key),
            key=lambda p: (p.interface_number, p.device),
        )
        taken.update(p.device for p in own)
        boards.append(BoardCandidate(probe, tuple(own)))
    return ScanResult(
        probes=probe_list,
        ports=port_list,
        boards=tuple(boards),
        unpaired_ports=tuple(p for p in port_list if p.is_usb and p.device not in taken),
        other_ports=tuple(p for p in port_list if not p.is_usb),
    )


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:48] or "board"


def guess_target(pyocd_target: str | None, known_targets: Sequence[str]) -> str | None:
    """The Aidge hardware target a pyOCD target type belongs to (longest name prefix)."""
    if not pyocd_target:
        return None
    name = pyocd_target.lower()
    matches = [t for t in known_targets if name.startswith(t.lower())]
    return max(matches, key=len) if matches else None


UNKNOWN_TARGET = "unknown"


def lab_from_scan(
    scan: ScanResult,
    known_targets: Sequence[str] = (),
    emulated_targets: Sequence[str] = (),
    name: str | None = None,
) -> LabMap:
    """A lab map of the scanned boards (plus the host and emulated boards given).

    Each probe becomes a board reached through it, with its UART as its ``/dev/serial/by-id``
    link when there is one (stable across plug order), else by USB serial number. A target
    that cannot be told from pyOCD's board id is written as ``unknown``, to edit.
    """
    boards: list[LabBoard] = [LabBoard(name="host", target="host")]
    used = {"host"}
    for emulated in emulated_targets:
        board_name = f"qemu-{emulated}"
        boards.append(LabBoard(name=board_name, target=emulated, emulated=True))
        used.add(board_name)
    for candidate in scan.boards:
        probe = candidate.probe
        base = _slug(probe.board_name or probe.product or probe.vendor or "probe")
        board_name = base
        if board_name in used:
            board_name = f"{base}-{normalize_serial(probe.unique_id)[-6:].lower() or len(used)}"
        while board_name in used:
            board_name = f"{board_name}-{len(used)}"
        used.add(board_name)
        uart = candidate.uart
        serial = None
        if uart is not None:
            serial = (
                SerialSpec(port=uart.by_id)
                if uart.by_id
                else SerialSpec(usb_serial_number=uart.serial_number)
            )
        target = guess_target(probe.pyocd_target, known_targets)
        notes: list[str] = [probe.label()]
        if target is None:
            notes.append("set 'target' to its Aidge hardware target")
        if uart is None:
            notes.append("no CDC port: add 'serial' with the board's UART")
        if len(candidate.ports) > 1:
            notes.append("other ports: " + ", ".join(p.device for p in candidate.ports[1:]))
        boards.append(
            LabBoard(
                name=board_name,
                target=target or UNKNOWN_TARGET,
                probe=ProbeSpec(
                    unique_id=probe.unique_id,
                    flash_method=probe.flash_method,
                    pyocd_target=probe.pyocd_target,
                ),
                serial=serial,
                description="; ".join(notes),
            )
        )
    return LabMap(name=name, boards=tuple(boards))


def lab_file_text(scan: ScanResult, lab: LabMap, host: str, when: str) -> str:
    """The lab file to write: a comment header saying what to check, then the YAML."""
    lines = [
        f"# Lab file written by `aidge-deploy boards scan` on {host} at {when}.",
        "# Check each board: its 'target' (an Aidge hardware target, `aidge-deploy targets`),",
        "# its probe's flash_method and its UART. Boards with target 'unknown' need one.",
    ]
    if scan.empty:
        lines.append("# No debug probe and no USB serial port was attached during the scan.")
    for port in scan.unpaired_ports:
        lines.append(f"# Serial port of no probe (a separate USB-UART?): {port.label()}")
    return "\n".join(lines) + "\n" + lab.to_yaml()


# --- reading this machine -------------------------------------------------------------------


def _by_id_links(by_id_dir: Path) -> dict[str, str]:
    links: dict[str, str] = {}
    try:
        entries = sorted(by_id_dir.iterdir())
    except OSError:
        return links
    for entry in entries:
        try:
            links.setdefault(os.path.realpath(entry), str(entry))
        except OSError:
            continue
    return links


def list_ports(by_id_dir: Path = BY_ID_DIR) -> list[PortInfo]:
    """Serial ports attached now (pyserial's ``list_ports``), with their by-id links."""
    from serial.tools import list_ports as pyserial_ports

    links = _by_id_links(by_id_dir)
    ports = []
    for info in pyserial_ports.comports():
        ports.append(port_from_pyserial(info, links.get(os.path.realpath(info.device))))
    return sorted(ports, key=lambda p: p.device)


def port_from_pyserial(info: Any, by_id: str | None = None) -> PortInfo:
    """A ``PortInfo`` from pyserial's ``ListPortInfo`` (or any object of that shape)."""
    return PortInfo(
        device=str(info.device),
        vid=info.vid,
        pid=info.pid,
        serial_number=info.serial_number,
        manufacturer=info.manufacturer,
        product=info.product,
        interface=info.interface,
        location=info.location,
        by_id=by_id,
    )


def probe_from_pyocd(probe: Any) -> ProbeInfo:
    """A ``ProbeInfo`` from a pyOCD ``DebugProbe``."""
    board = probe.associated_board_info
    return ProbeInfo(
        unique_id=str(probe.unique_id),
        vendor=str(probe.vendor_name or ""),
        product=str(probe.product_name or ""),
        board_name=getattr(board, "name", None) if board is not None else None,
        pyocd_target=getattr(board, "target", None) if board is not None else None,
    )


def list_probes() -> tuple[list[ProbeInfo], list[str]]:
    """Debug probes pyOCD sees now, and the problems met listing them."""
    try:
        from pyocd.core.helpers import ConnectHelper
    except ImportError as exc:  # pragma: no cover - pyocd is a dependency
        return [], [f"pyOCD is not installed ({exc})"]
    try:
        probes = ConnectHelper.get_all_connected_probes(blocking=False, print_wait_message=False)
    except Exception as exc:  # a probe backend (libusb, J-Link DLL) can fail in many ways
        return [], [f"pyOCD could not list probes: {type(exc).__name__}: {exc}"]
    return [probe_from_pyocd(p) for p in probes], []


def scan(by_id_dir: Path = BY_ID_DIR) -> ScanResult:
    """List and pair what is attached to this machine."""
    probes, problems = list_probes()
    result = pair(probes, list_ports(by_id_dir))
    if problems:
        result = ScanResult(
            result.probes,
            result.ports,
            result.boards,
            result.unpaired_ports,
            result.other_ports,
            tuple(problems),
        )
    return result


__all__ = [
    "UNKNOWN_TARGET",
    "BoardCandidate",
    "PortInfo",
    "ProbeInfo",
    "ScanResult",
    "guess_target",
    "lab_file_text",
    "lab_from_scan",
    "list_ports",
    "list_probes",
    "normalize_serial",
    "pair",
    "port_from_pyserial",
    "probe_from_pyocd",
    "scan",
]
