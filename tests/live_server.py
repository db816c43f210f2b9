"""A live `openafm serve` application on loopback for the tests: uvicorn in a thread, on a free port."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import uvicorn

from openafm.runtime.engine import EngineConfig
from openafm.serve.app import create_app
from openafm.serve.engine_front import Served


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def live_server(lm, config: EngineConfig = EngineConfig(), *, engine: bool = True, adapters: dict | None = None,
                draft=None, **app_kw):
    """Yields (base URL, Served) for a server over the loaded model `lm`; stops it afterwards. engine=False: the
    engine loop is not started, so whatever is submitted stays queued."""
    served = Served(lm, adapters, config=config, draft=draft)
    if engine:
        served.start()
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(served, **app_kw), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(3000):
        if server.started:
            break
        time.sleep(0.01)
    assert server.started, f"uvicorn did not start on port {port}"
    try:
        yield f"http://127.0.0.1:{port}", served
    finally:
        server.should_exit = True
        thread.join(10)
        served.stop()
