"""Run the farm service under uvicorn on a plain asyncio loop (labgrid's client session
refuses uvloop), on a socket bound here so ``--port 0`` works: the URL actually served is
written to ``<data>/service.url`` once the server is up."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from pathlib import Path

from aidge_deploy.farm.settings import FarmSettings

log = logging.getLogger("aidge_deploy.farm")


def serve(settings: FarmSettings, host: str = "127.0.0.1", port: int = 8000) -> None:
    import uvicorn

    from aidge_deploy.farm.service import create_app

    os.umask(0o077)  # what the service writes (database, exports, results) is its own
    # the CLI configured warnings only: the service's own log says what it does
    logging.basicConfig(format="%(asctime)s service %(levelname)s %(message)s", force=True)
    logging.getLogger("aidge_deploy.farm").setLevel(logging.INFO)
    app = create_app(settings)  # raises NoAdminError before binding anything
    _quiet_garbage_collector()
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are
    # TCP, and without it a response sent as headers then body waits for the client's
    # delayed ACK (~40 ms on Linux) between the two
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}"
    config = uvicorn.Config(
        app,
        loop="asyncio",
        http="httptools",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=5,
        # the client's address is the peer's: X-Forwarded-For is believed only from the
        # proxies the settings name (``deps.client_address``), never from uvicorn's default
        proxy_headers=False,
    )
    server = uvicorn.Server(config)
    url_file = Path(settings.data_dir) / "service.url"

    async def main() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.05)
        if server.started:
            tmp = url_file.with_suffix(".tmp")
            tmp.write_text(url + "\n", encoding="utf-8")
            tmp.replace(url_file)
            print(f"farm service listening on {url} (API: {url}/api)", flush=True)
        await task

    try:
        asyncio.run(main())
    finally:
        url_file.unlink(missing_ok=True)
        sock.close()


#: allocations between two young collections (CPython's default: 700)
GC_YOUNG_THRESHOLD = 50_000


def _quiet_garbage_collector() -> None:
    """Keep the garbage collector's full passes short and rare, so no request waits
    behind one. Each full pass walks every tracked object with the GIL held; the
    service's imports alone (FastAPI, SQLAlchemy, labgrid, gRPC: ~130,000 objects) made
    each pass take tens of milliseconds, hundreds on a busy machine, a stall of every
    request in flight. They never become garbage: ``gc.freeze()`` takes them out of the
    collector's sight. And a young collection every 700 allocations promoted the objects
    of requests still in flight to the older generations, where they died later and
    triggered full passes: young collections run less often instead."""
    import gc

    import labgrid.remote.client  # noqa: F401 - imported on the first connect otherwise
    from labgrid.remote.generated import labgrid_coordinator_pb2  # noqa: F401

    gc.collect()
    gc.freeze()
    _young, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


__all__ = ["serve"]
