"""``boards scan``: pairing probes with their own serial ports, and the lab file it writes.

This machine has no boards; pairing and lab writing are tested on listings captured on real
machines and published by their users (``tests/data/lab_scan/captured``, verbatim, sources
in its README), and on two listings transcribed from lab machines (``tests/data/lab_scan``),
fed where pyOCD and pyserial would answer.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from aidge_deploy import labscan
from aidge_deploy.cli.main import app
from aidge_deploy.config import DeployConfig
from aidge_deploy.lab import FlashMethod, Reach, load_lab
from aidge_deploy.labscan import PortInfo, ProbeInfo, lab_file_text, lab_from_scan, pair
from lab_listings import captured, mbedls_listing, parse_list_ports_v, parse_pyocd_list

DATA = Path(__file__).parent / "data" / "lab_scan"
KNOWN = ["host", "stm32h7a3", "stm32h743", "stm32l4r5", "mps2-an386"]


def listing(name: str) -> tuple[list[ProbeInfo], list[PortInfo]]:
    doc = json.loads((DATA / f"{name}.json").read_text())
    return [ProbeInfo(**p) for p in doc["probes"]], [PortInfo(**p) for p in doc["ports"]]


def flat(text: str) -> str:
    return " ".join(text.split())


def test_stlink_is_paired_with_its_vcp_and_the_ftdi_cable_is_left_alone() -> None:
    scan = pair(*listing("bench_stlink_ftdi"))
    assert not scan.empty
    (board,) = scan.boards
    assert board.probe.board_name == "NUCLEO-H7A3ZI-Q"
    assert board.uart is not None and board.uart.device == "/dev/ttyACM0"
    assert [p.device for p in scan.unpaired_ports] == ["/dev/ttyUSB0"]
    assert [p.device for p in scan.other_ports] == ["/dev/ttyS0"]


def test_jlink_serial_with_leading_zeros_and_a_two_vcp_stlink() -> None:
    scan = pair(*listing("bench_jlink_daplink"))
    by_product = {b.probe.product: b for b in scan.boards}
    jlink = by_product["J-Link OB-nRF5340-NordicSemi"]
    assert jlink.uart is not None and jlink.uart.device == "/dev/ttyACM0"
    assert jlink.probe.flash_method is FlashMethod.JLINK
    daplink = by_product["DAPLink CMSIS-DAP"]
    assert daplink.uart is not None and daplink.uart.device == "/dev/ttyACM1"
    assert daplink.probe.flash_method is FlashMethod.PYOCD
    stlink = by_product["STLINK-V3"]
    # two VCPs of one probe: the first USB interface is the board's UART, in any listing order
    assert [p.device for p in stlink.ports] == ["/dev/ttyACM2", "/dev/ttyACM3"]
    assert not scan.unpaired_ports and not scan.other_ports


def test_ttyacm_index_never_pairs_a_port_of_another_probe() -> None:
    probes, ports = listing("bench_jlink_daplink")
    # the same ports in another plug order: pairing follows serial numbers, not indices
    shuffled = [
        PortInfo(**{**p.__dict__, "device": f"/dev/ttyACM{9 - i}"}) for i, p in enumerate(ports)
    ]
    scan = pair(probes, shuffled)
    for board in scan.boards:
        assert all(
            labscan.normalize_serial(p.serial_number)
            == labscan.normalize_serial(board.probe.unique_id)
            for p in board.ports
        )


def test_lab_file_from_a_scan_loads_and_reaches_each_board(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probes, ports = listing("bench_jlink_daplink")
    scan = pair(probes, ports)
    lab = lab_from_scan(scan, KNOWN, ["mps2-an386"], name="bench")
    path = tmp_path / "lab.yaml"
    path.write_text(lab_file_text(scan, lab, "bench-pc", "2026-11-30T10:00:00+00:00"))
    text = path.read_text()
    assert text.startswith("# Lab file written by `aidge-deploy boards scan` on bench-pc")
    loaded = load_lab(path)
    reach = {b.name: b.reach for b in loaded.boards}
    assert reach["host"] is Reach.HOST and reach["qemu-mps2-an386"] is Reach.EMULATED
    frdm = loaded.board("frdm-k64f")
    assert frdm.target == labscan.UNKNOWN_TARGET and "set 'target'" in frdm.description
    assert frdm.serial is not None and frdm.serial.port is not None
    assert frdm.serial.port.startswith("/dev/serial/by-id/usb-ARM_DAPLink")
    jlink = next(b for b in loaded.boards if b.probe and b.probe.flash_method is FlashMethod.JLINK)
    assert jlink.probe is not None and jlink.probe.unique_id == "683714251"
    # the two-VCP ST-LINK has no by-id link in this listing: reached by USB serial number,
    # resolved against the ports attached when the board is used
    stlink = loaded.board("stlink-v3")
    assert stlink.serial is not None and stlink.serial.usb_serial_number is not None
    assert "other ports: /dev/ttyACM3" in stlink.description
    monkeypatch.setattr(
        "serial.tools.list_ports.comports",
        lambda: [SimpleNamespace(**p.__dict__) for p in ports],
    )
    options = loaded.deploy_options("stlink-v3")
    assert options["serial_port"] == "/dev/ttyACM2"
    assert options["probe_unique_id"] == "002B003C3331511236363930"
    DeployConfig(**options)


def test_pyocd_target_names_the_aidge_target() -> None:
    scan = pair(*listing("bench_stlink_ftdi"))
    lab = lab_from_scan(scan, KNOWN)
    nucleo = lab.board("nucleo-h7a3zi-q")
    assert nucleo.target == "stm32h7a3"
    assert nucleo.probe is not None and nucleo.probe.pyocd_target == "stm32h7a3zitxq"
    text = lab_file_text(scan, lab, "pc", "now")
    assert "Serial port of no probe (a separate USB-UART?): /dev/ttyUSB0 (FTDI" in text


def test_scan_on_this_machine_says_plainly_when_nothing_is_attached() -> None:
    scan = labscan.scan()
    res = CliRunner().invoke(app, ["boards", "scan"])
    assert res.exit_code == 0, res.output
    if scan.empty:
        assert "No boards attached" in flat(res.output)
    else:  # a developer's machine with a board plugged in
        assert "Boards" in res.output or "USB serial ports" in res.output


def test_scan_with_no_boards_says_so_plainly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever this machine has plugged in: pyOCD seeing no probe and pyserial only the
    PC's built-in port (stand-ins answering as they do on a machine with no boards)."""
    monkeypatch.setattr(labscan, "list_probes", lambda: ([], []))
    monkeypatch.setattr(
        labscan, "list_ports", lambda by_id_dir=labscan.BY_ID_DIR: [PortInfo(device="/dev/ttyS0")]
    )
    res = CliRunner().invoke(app, ["boards", "scan"])
    assert res.exit_code == 0, res.output
    text = flat(res.output)
    assert "No boards attached: pyOCD sees no debug probe and there is no USB serial port" in text
    assert "Ignored built-in serial ports: /dev/ttyS0" in text
    out = tmp_path / "lab.yaml"
    res = CliRunner().invoke(app, ["boards", "scan", "--write", str(out)])
    assert res.exit_code == 0, res.output
    assert "No debug probe and no USB serial port was attached" in out.read_text()
    boards = load_lab(out).boards
    assert boards[0].name == "host" and not any(b.probe or b.serial for b in boards)


def _scan_and_write(
    monkeypatch: pytest.MonkeyPatch, probes: list[ProbeInfo], ports: list[PortInfo], out: Path
) -> str:
    """``boards scan --write out`` with pyOCD and pyserial answering ``probes``/``ports``
    (stand-ins for the lab machine's); returns the output, flattened."""
    monkeypatch.setattr(labscan, "list_probes", lambda: (probes, []))
    monkeypatch.setattr(labscan, "list_ports", lambda by_id_dir=labscan.BY_ID_DIR: ports)
    res = CliRunner().invoke(app, ["boards", "scan", "--write", str(out)])
    assert res.exit_code == 0, res.output
    return flat(res.output)


def test_scan_cli_lists_pairs_and_writes_the_lab(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probes, ports = listing("bench_stlink_ftdi")
    out = tmp_path / "lab.yaml"
    text = _scan_and_write(monkeypatch, probes, ports, out)
    assert "NUCLEO-H7A3ZI-Q" in text and "/dev/ttyACM0" in text and "/dev/ttyUSB0" in text
    lab = load_lab(out)
    assert lab.board("nucleo-h7a3zi-q").target == "stm32h7a3"
    again = CliRunner().invoke(app, ["boards", "scan", "--write", str(out)])
    assert again.exit_code == 2 and "--overwrite" in flat(again.output)
    res = CliRunner().invoke(app, ["boards", "scan", "--json"])
    doc = json.loads(res.stdout)
    assert doc["boards"][0]["ports"] == ["/dev/ttyACM0"]
    assert doc["unpaired_ports"] == ["/dev/ttyUSB0"]


# --- listings captured on real machines (tests/data/lab_scan/captured, sources in README) ---


def test_captured_pyocd_listings_read_as_pyocd_printed_them() -> None:
    by_file = {
        name: parse_pyocd_list(captured(name))
        for name in (
            "pyocd1572_pyocd_list.txt",
            "pyocd1523_pyocd_list.txt",
            "pyocd750_pyocd_list.txt",
            "pyocd2017_pyocd_list.txt",
            "pyocd1060_pyocd_list.txt",
            "pyocd1123_pyocd_list.txt",
        )
    }
    assert all(len(probes) == 1 for probes in by_file.values()), by_file
    (stlink,) = by_file["pyocd1572_pyocd_list.txt"]
    assert stlink.unique_id == "34FF72063048553717451543" and stlink.pyocd_target is None
    (k64f,) = by_file["pyocd750_pyocd_list.txt"]  # pyOCD 0.2x: board and target in brackets
    assert k64f.board_name == "FRDM-K64F" and k64f.pyocd_target == "k64f"
    assert k64f.unique_id == "024002261e101e0d000000000000000000000000e3c9e3b5"
    (arduino,) = by_file["pyocd2017_pyocd_list.txt"]
    assert arduino.unique_id == "F09E9E7B1E90" and arduino.product.endswith("CMSIS-DAP")
    assert all(p.flash_method is FlashMethod.PYOCD for ps in by_file.values() for p in ps)


def test_captured_daplink_pairs_with_its_own_port_among_other_machines_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mbed-ls's listing of a K64F (DAPLink) with its serial port, on one machine, among
    USB-UART ports captured elsewhere (an FT4232 with four ports of one serial number, a
    CH340 with none): only the board's own port is paired."""
    probes, own = mbedls_listing(captured("mbedls299_mbedls_j.json"))
    others = parse_list_ports_v(captured("pyserial141_list_ports_v.txt")) + parse_list_ports_v(
        captured("pyserial699_list_ports_v.txt")
    )
    scan = pair(probes, [*others, *own])
    (board,) = scan.boards
    assert board.uart is not None and board.uart.device == "COM18"
    assert [p.device for p in board.ports] == ["COM18"]
    assert sorted(p.device for p in scan.unpaired_ports) == sorted(p.device for p in others)
    lab = lab_from_scan(scan, KNOWN, name="captured")
    path = tmp_path / "lab.yaml"
    path.write_text(lab_file_text(scan, lab, "pc", "now"))
    text = path.read_text()
    for port in others:  # every USB-UART of no probe is named for the user to place
        assert f"Serial port of no probe (a separate USB-UART?): {port.device} " in text
    loaded = load_lab(path)
    k64f = loaded.board("k64f")
    assert k64f.probe is not None
    assert k64f.probe.unique_id == "0240000032044e4500257009997b00386781000097969900"
    assert k64f.serial is not None and k64f.serial.usb_serial_number == board.uart.serial_number
    monkeypatch.setattr(
        "serial.tools.list_ports.comports",
        lambda: [SimpleNamespace(**p.__dict__) for p in [*others, *own]],
    )
    assert loaded.deploy_options("k64f")["serial_port"] == "COM18"


def test_captured_stlink_v2_dongle_has_no_uart_and_windows_ports_stay_apart(
    tmp_path: Path,
) -> None:
    """A standalone ST-LINK/V2 (0483:3748) has no virtual COM port; the Windows listing
    has a built-in COM1, an FTDI whose hwid pyserial could not parse, and a KitProg UART
    without serial number: nothing pairs, nothing is lost, the lab file says what to add."""
    probes = parse_pyocd_list(captured("pyocd1572_pyocd_list.txt"))
    ports = parse_list_ports_v(captured("pyserial61_list_ports_v.txt"))
    scan = pair(probes, ports)
    assert not scan.empty
    (board,) = scan.boards
    assert board.uart is None
    assert [p.device for p in scan.unpaired_ports] == ["COM7"]  # KitProg: USB, no serial
    assert [p.device for p in scan.other_ports] == ["COM1", "COM6"]
    lab = lab_from_scan(scan, KNOWN)
    path = tmp_path / "lab.yaml"
    path.write_text(lab_file_text(scan, lab, "pc", "now"))
    (stlink,) = [b for b in load_lab(path).boards if b.probe is not None]
    assert stlink.target == labscan.UNKNOWN_TARGET and stlink.serial is None
    assert "no CDC port" in stlink.description and "set 'target'" in stlink.description


def test_captured_listings_through_boards_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probes = parse_pyocd_list(captured("pyocd750_pyocd_list.txt")) + parse_pyocd_list(
        captured("pyocd2017_pyocd_list.txt")
    )
    ports = parse_list_ports_v(captured("pyserial141_list_ports_v.txt"))
    out = tmp_path / "lab.yaml"
    text = _scan_and_write(monkeypatch, probes, ports, out)
    assert "FRDM-K64F" in text and "F09E9E7B1E90" in text and "/dev/ttyUSB10" in text
    lab = load_lab(out)
    assert {b.probe.unique_id for b in lab.boards if b.probe} == {p.unique_id for p in probes}
    assert lab.board("frdm-k64f").probe.pyocd_target == "k64f"  # type: ignore[union-attr]
