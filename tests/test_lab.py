"""The lab map: format, validation errors that name the field, options that reach a board."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from aidge_deploy.config import DeployConfig
from aidge_deploy.lab import LabError, Reach, load_lab, parse_lab

LAB = """
version: 1
name: bench
farm: {url: http://farm.example:8000/api, username: ci}
boards:
  an386: {target: mps2-an386, emulated: true}
  me: {target: host}
  nucleo:
    target: stm32h7a3
    probe: {unique_id: "0670FF3735", flash_method: openocd}
    serial: {port: /dev/serial/by-id/usb-STM_STLINK-if02, baudrate: 921600}
  pi:
    target: raspberrypi
    ssh: {host: 192.168.1.50, user: pi, key_path: ~/.ssh/id_ed25519, docker_image: "aidge:1"}
  farm-h7: {target: stm32h7a3, farm_board: stm32h7_lab_01, tags: {room: b12}}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lab.yaml"
    path.write_text(text)
    return path


def test_lab_reads_every_way_of_reaching_a_board(tmp_path: Path) -> None:
    lab = load_lab(_write(tmp_path, LAB))
    assert [b.name for b in lab.boards] == ["an386", "me", "nucleo", "pi", "farm-h7"]
    reach = {b.name: (b.reach, b.backend) for b in lab.boards}
    assert reach == {
        "an386": (Reach.EMULATED, "local"),
        "me": (Reach.HOST, "local"),
        "nucleo": (Reach.PROBE, "local"),
        "pi": (Reach.SSH, "ssh_docker"),
        "farm-h7": (Reach.FARM, "api"),
    }
    nucleo = lab.deploy_options("nucleo")
    assert nucleo["serial_port"] == "/dev/serial/by-id/usb-STM_STLINK-if02"
    assert nucleo["serial_baudrate"] == 921600
    assert nucleo["flash_method"] == "openocd"
    pi = lab.deploy_options("pi")
    assert pi["ssh_key_path"] == Path("~/.ssh/id_ed25519").expanduser()
    farm = lab.deploy_options("farm-h7")
    assert farm["api_url"] == "http://farm.example:8000/api"
    assert farm["api_board_name"] == "stm32h7_lab_01"
    assert "api_password" not in farm
    # every option set is a DeployConfig field
    for board in lab.boards:
        DeployConfig(**lab.deploy_options(board.name))


def test_lab_round_trips_through_yaml(tmp_path: Path) -> None:
    lab = load_lab(_write(tmp_path, LAB))
    again = parse_lab(__import__("yaml").safe_load(lab.to_yaml()))
    assert again.boards == lab.boards and again.farm == lab.farm


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("boards:\n  b: {target: mps2-an386}\n", "boards.b: Value"),
        (
            "boards:\n  b: {target: stm32h7a3, emulated: true, probe: {unique_id: x}}\n",
            "names emulated and probe",
        ),
        (
            "boards:\n  b: {target: x, probe: {unique_id: a, flash_method: stlink}}\n",
            "boards.b.probe.flash_method",
        ),
        (
            "boards:\n  b: {target: x, probe: {unique_id: a}, serial: {baudrate: 9600}}\n",
            "exactly one of 'port' and 'usb_serial_number'",
        ),
        ("boards:\n  b: {target: host, colour: red}\n", "boards.b.colour: Extra inputs"),
        ("boards: [1, 2]\n", "'boards' must map board names"),
        ("version: 2\nboards: {}\n", "version"),
    ],
)
def test_bad_lab_files_name_the_field(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(LabError) as info:
        load_lab(_write(tmp_path, text))
    assert fragment.replace("Value", "") in str(info.value)
    assert str(tmp_path / "lab.yaml") in str(info.value)


def test_missing_lab_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="not found"):
        load_lab(tmp_path / "nope.yaml")
    with pytest.raises(LabError, match="is a folder"):
        load_lab(tmp_path)


def test_unknown_board_suggests_a_name(tmp_path: Path) -> None:
    lab = load_lab(_write(tmp_path, LAB))
    with pytest.raises(LabError, match="Did you mean 'nucleo'"):
        lab.board("nucleoo")


def test_farm_board_needs_a_farm_section() -> None:
    lab = parse_lab({"boards": {"x": {"target": "stm32h7a3", "farm_board": "x1"}}})
    with pytest.raises(LabError, match="no 'farm' section"):
        lab.deploy_options("x")


def test_serial_port_by_usb_serial_number(monkeypatch: pytest.MonkeyPatch) -> None:
    # Stand-in for pyserial's list_ports on a machine with a probe attached (this one has
    # none): the listing shape is pyserial's ListPortInfo.
    ports = [
        SimpleNamespace(device="/dev/ttyACM1", serial_number="AAA", location="1-2:1.2"),
        SimpleNamespace(device="/dev/ttyACM0", serial_number="BBB", location="1-1:1.2"),
    ]
    monkeypatch.setattr("serial.tools.list_ports.comports", lambda: ports)
    lab = parse_lab(
        {
            "boards": {
                "a": {
                    "target": "stm32h7a3",
                    "probe": {"unique_id": "AAA"},
                    "serial": {"usb_serial_number": "AAA"},
                },
                "c": {
                    "target": "stm32h7a3",
                    "probe": {"unique_id": "CCC"},
                    "serial": {"usb_serial_number": "CCC"},
                },
            }
        }
    )
    assert lab.deploy_options("a")["serial_port"] == "/dev/ttyACM1"
    with pytest.raises(LabError, match="no serial port with USB serial number 'CCC'") as info:
        lab.deploy_options("c")
    assert "/dev/ttyACM0 (sn BBB)" in str(info.value.hint)
