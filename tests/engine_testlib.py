"""A uvicorn server in a thread (stoppable, restartable on the same port) for the engine tests:
`frontier-rl serve`'s app, or a misbehaving one, without a subprocess."""

from __future__ import annotations

import threading
import time

import uvicorn

from frontier_rl.rollout.serve import free_port


class Server:
    """Serves `app` on 127.0.0.1; `stop()` cancels requests still in flight after
    `grace` seconds, as a killed server drops them."""

    def __init__(self, app, port: int | None = None, grace: float | None = None):
        self.app, self.port, self.grace = app, port or free_port(), grace
        self.url = f"http://127.0.0.1:{self.port}"
        self.start()

    def start(self):
        self.server = uvicorn.Server(uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, log_level="critical",
            timeout_graceful_shutdown=self.grace))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)

    def stop(self):
        self.server.should_exit = True
        self.thread.join(10)
