"""The driver's progress endpoint: the operator's progress channel (controller.progress_read).

``GET /progress`` answers the newest progress record the watchdog made (the same JSON the
log line carries), ``204`` before the first. The operator pulls it at its own pace from the
pod's IP, so a driver cannot push more than the operator asks for; the log stays what a
person reads, and a job that prints 10,000 lines between two records hides nothing.

It needs no token and grants nothing: it answers what ``kubectl logs`` shows already, on the
container port named ``progress`` (contract.names.PROGRESS_PORT_NAME). Any other path is 404.
"""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from app.monitoring.reporting import ProgressSink
from contract.names import PROGRESS_PATH

log = logging.getLogger("streamq.progress")


class ProgressEndpoint:
    """Serves ``sink.latest`` on ``host:port`` from a daemon thread; ``port`` 0 picks a free one."""

    def __init__(self, sink: ProgressSink, port: int, host: str = "0.0.0.0"):  # every address of the pod
        self.sink = sink

        class Handler(BaseHTTPRequestHandler):
            def do_GET(handler) -> None:  # `handler`: the request, beside the endpoint's self
                if handler.path.split("?", 1)[0] != PROGRESS_PATH:
                    handler.send_error(404)
                    return
                record = sink.latest
                if record is None:
                    handler.send_response(204)
                    handler.end_headers()
                    return
                body = record.to_line().encode()
                handler.send_response(200)
                handler.send_header("Content-Type", "application/json")
                handler.send_header("Content-Length", str(len(body)))
                handler.end_headers()
                handler.wfile.write(body)

            def log_message(handler, *args) -> None:  # a line per read would flood the driver's log
                pass

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="progress-endpoint", daemon=True)

    def start(self) -> ProgressEndpoint:
        self._thread.start()
        log.info("progress endpoint on port %d (%s)", self.port, PROGRESS_PATH)
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
