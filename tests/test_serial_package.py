"""labgrid #1245: pyserial and pyserial-labgrid both ship ``serial``.

scripts/setup.sh installs labgrid's fork last; this checks that the ``serial`` on disk is
that fork, complete (pip uninstalling the other distribution would have removed files), and
that what our UART capture and pyOCD use from it still works.
"""

from __future__ import annotations

import importlib.metadata
import socket
import threading

from envparts import not_applicable


def test_serial_is_labgrids_fork_and_complete() -> None:
    try:
        importlib.metadata.version("labgrid")
    except importlib.metadata.PackageNotFoundError:
        not_applicable("the farm extra is not installed: plain pyserial is fine")
    import serial
    import serial.rfc2217
    import serial.tools.list_ports
    import serial.urlhandler.protocol_socket

    assert serial.VERSION == "3.5.0.2", (
        "pyserial overwrote pyserial-labgrid: rerun scripts/setup.sh"
    )
    assert callable(serial.tools.list_ports.comports)


def test_socket_url_roundtrip() -> None:
    """The ``socket://`` handler our QEMU UART capture opens, against a loopback server."""
    import serial

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def echo() -> None:
        conn, _ = server.accept()
        with conn:
            conn.sendall(conn.recv(64).upper())

    t = threading.Thread(target=echo, daemon=True)
    t.start()
    with serial.serial_for_url(f"socket://127.0.0.1:{port}", timeout=5) as port_:
        port_.write(b"ping\n")
        assert port_.readline() == b"PING\n"
    t.join(5)
    server.close()


def test_pyocd_imports_with_this_serial() -> None:
    import pyocd
    from pyocd.core.helpers import ConnectHelper  # noqa: F401

    assert pyocd.__version__
