"""Every fake driver's progress endpoint, in one process: what bench.operator_running's kwok pods serve.

kwok gives each pod a loopback address (testbed.kwok.POD_CIDR), so a connection the operator opens
to a pod's IP arrives here, on 0.0.0.0, with that IP as its local address: the pod, hence the query,
is known from the socket alone. The record served is what a running job's endpoint
(app.monitoring.endpoint) serves: a ``ProgressRecord`` as JSON, made ``RECORD_EVERY_S`` ago at most
(a job reports every batch, and every 10 s when idle; this one models a busy micro-batch job).
The operator's side is exactly production's: it reads ``status.podIP`` and the port named
``progress`` from the pod, and parses and judges the answer as it would a real driver's.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from contract import LABEL_QUERY, PROGRESS_PATH
from contract.modes import Mode
from contract.progress import HealthState, ProgressHealth, ProgressRecord

RECORD_EVERY_S = 1.0


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def record_for(query: str, now: float) -> ProgressRecord:
    made = now - (now % RECORD_EVERY_S)
    batch = int(made / RECORD_EVERY_S) % 1_000_000
    return ProgressRecord(
        query=query, mode=Mode.MICRO_BATCH, batch_id=batch, committed_offsets={"payments": {"0": batch * 10}},
        last_commit_time=_iso(made), input_rows_per_second=10.0, processed_rows_per_second=10.0,
        lag={"payments": {"0": 0}}, total_lag=0, partitions={"payments": 1}, slots=1,
        health=ProgressHealth(state=HealthState.HEALTHY), timestamp=_iso(made),
    )  # fmt: skip


class FakeDrivers:
    """Serves ``record_for(query)`` to a connection on a pod's address; follows pods by a watch."""

    def __init__(self, core: Any, namespace: str, selector: str, port: int):
        self.core, self.namespace, self.selector = core, namespace, selector
        self.by_ip: dict[str, str] = {}
        self.served = 0
        self.unknown = 0
        self._halt = threading.Event()
        farm = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = farm.by_ip.get(self.connection.getsockname()[0])
                if query is None or self.path != PROGRESS_PATH:
                    farm.unknown += 1
                    self.send_error(404)
                    return
                body = record_for(query, time.time()).to_line().encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                farm.served += 1

            def log_message(self, *args: Any) -> None:  # one line a read: thousands a minute
                pass

        self.server = ThreadingHTTPServer(("0.0.0.0", port), Handler)  # every pod address is one of ours
        self.server.daemon_threads = True
        self.server.request_queue_size = 1024

    def start(self) -> FakeDrivers:
        threading.Thread(target=self.server.serve_forever, name="fake-drivers", daemon=True).start()
        threading.Thread(target=self._follow, name="fake-drivers-pods", daemon=True).start()
        return self

    def _follow(self) -> None:
        from kubernetes import watch

        while not self._halt.is_set():
            listed = self.core.list_namespaced_pod(self.namespace, label_selector=self.selector)
            for pod in listed.items:
                self._note(pod)
            try:
                for event in watch.Watch().stream(self.core.list_namespaced_pod, self.namespace,
                                                  label_selector=self.selector, timeout_seconds=60,
                                                  resource_version=listed.metadata.resource_version):  # fmt: skip
                    self._note(event["object"])
                    if self._halt.is_set():
                        return
            except Exception:  # noqa: BLE001 - an expired watch: list again
                continue

    def _note(self, pod: Any) -> None:
        ip = pod.status.pod_ip if pod.status else None
        if ip:
            self.by_ip[ip] = (pod.metadata.labels or {}).get(LABEL_QUERY, "")

    def stop(self) -> None:
        self._halt.set()
        self.server.shutdown()
        self.server.server_close()
