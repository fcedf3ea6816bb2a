"""The progress channel (controller.progress_read, app.monitoring.endpoint): the operator reads each
running driver's newest record from its pod's address, not from its log.

A real job (real Spark) serves the endpoint here at 127.0.0.1 and the test plays the kubelet: it
reports the pod Running at that address and serves the job's log too, so the log channel is there
to compare. Another "driver" at 127.0.0.2 is a hostile server on the same port.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from contract import MAX_PROGRESS_BYTES
from controller import names
from controller.progress import last_progress
from testbed.jobs import JobProcess
from testbed.kube import free_port
from testbed.specs import RATE_TO_CONSOLE, query_spec

pytestmark = pytest.mark.integration

LOUD_ROWS_PER_S = 12_000  # console rows a second, one batch a second: over 10,000 log lines between two records
INTERVAL_S = 1  # the operator reads progress every second here (15 s by default)


class Liar:
    """A driver's progress port that answers what no job would: ``answer`` is what it sends next."""

    def __init__(self, host: str, port: int):
        self.answer = b""
        liar = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body = liar.answer
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def age_s(progress: dict) -> float:
    moment = datetime.fromisoformat(progress["updatedAt"].replace("Z", "+00:00"))
    return (datetime.now(UTC) - moment).total_seconds()


def most_lines_between_records(log: str) -> int:
    most = since = 0
    for line in log.splitlines():
        if last_progress(line) is not None:
            most, since = max(most, since), 0
        else:
            since += 1
    return most


def counters(metrics_port: int, name: str) -> dict[tuple[str, ...], float]:
    """A counter of the operator's /metrics, by its labels' values (in their order)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    found = re.findall(rf"^{name}\{{([^}}]*)\}} ([0-9.e+]+)$", text, re.M)
    return {tuple(re.findall(r'="([^"]*)"', labels)): float(value) for labels, value in found}


def degraded(status: dict) -> dict:
    return next((c for c in status.get("conditions", []) if c["type"] == "Degraded"), {})


def test_a_driver_that_prints_thousands_of_lines_between_records_stays_fresh_and_a_liar_is_refused_alone(
    cluster, start_operator, kubelet, tmp_path
):
    port, metrics_port = free_port(), free_port()
    start_operator(metrics_port=metrics_port, STREAMQ_PROGRESS_INTERVAL_SECONDS=str(INTERVAL_S),
                   STREAMQ_PROGRESS_PORT=str(port))  # fmt: skip
    loud = query_spec(RATE_TO_CONSOLE, source={"rate": {"rowsPerSecond": LOUD_ROWS_PER_S, "numPartitions": 1}},
                      transforms=[], sink={"console": {"numRows": 100_000}}, trigger={"microBatch": {"interval": "1s"}},
                      checkpoint={"location": str(tmp_path / "ck")})  # fmt: skip
    cluster.apply("loud", loud)
    cluster.apply("liar", query_spec(RATE_TO_CONSOLE))
    loud_pod, liar_pod = (cluster.wait_driver(q, 1).metadata.name for q in ("loud", "liar"))
    container = cluster.driver_pods("loud")[0].spec.containers[0]
    assert [(p.name, p.container_port) for p in container.ports or []] == [(names.PORT_PROGRESS, port)]

    document = tmp_path / "query.json"
    document.write_text(json.dumps(cluster.query_document("loud")))
    job = JobProcess(document, tmp_path, env={"STREAMQ_PROGRESS_PORT": str(port), "STREAMQ_POD_IP": "127.0.0.1"})
    liar = Liar("127.0.0.2", port)
    liar.answer = b"{" + b"x" * (2 * MAX_PROGRESS_BYTES)  # a flood: twice what the operator reads
    try:
        for pod, address in ((loud_pod, "127.0.0.1"), (liar_pod, "127.0.0.2")):
            kubelet.bind(cluster.core, cluster.namespace, pod, kubelet.node)
            cluster.pod_runs(pod, pod_ip=address)
        kubelet.serve(cluster.namespace, loud_pod, names.DRIVER_CONTAINER, job.log_path)

        # 1. A record every 10 s, 20,000 console lines between two: the status keeps up with the records
        first = cluster.wait_status("loud", lambda s: (s.get("progress") or {}).get("batchId") is not None, timeout=300,
                                    what="a first record of the loud job in status.progress")  # fmt: skip
        ages, tails_with_a_record = [], 0
        batch = first["progress"]["batchId"]
        deadline = time.monotonic() + 35
        while time.monotonic() < deadline:
            status = cluster.status("loud")
            ages.append(age_s(status["progress"]))
            batch = max(batch, status["progress"]["batchId"])
            tail = cluster.core.read_namespaced_pod_log(loud_pod, cluster.namespace, container=names.DRIVER_CONTAINER,
                                                        tail_lines=200)  # what the log channel would read  # fmt: skip
            tails_with_a_record += last_progress(tail) is not None
            time.sleep(0.5)  # the poll interval of this sampling (35 s of it): a wait on nothing
        gap = most_lines_between_records(job.log_path.read_text(errors="replace"))
        print(
            f"{len(ages)} samples over 35 s: status.progress age max {max(ages):.1f}s; up to {gap} log lines between "
            f"two records; a 200-line log tail (the log channel) held a record in {tails_with_a_record} of them"
        )
        assert gap >= 10_000, gap  # the job did bury its records
        assert batch > first["progress"]["batchId"]  # new records came in
        # a record every batch or 10 s, read every second: never older than that, whatever the log holds
        assert max(ages) <= 10 + INTERVAL_S + 5, ages

        # 2. The liar floods: refused, on its query alone; then malformed: refused again, and said why
        status = cluster.wait_status("liar", lambda s: degraded(s).get("reason") == "ProgressRefused", timeout=30,
                                     what="ProgressRefused on the flooding driver")  # fmt: skip
        assert "larger than 64 KiB" in degraded(status)["message"] and status["phase"] == "Running"
        assert "x" * 20 not in json.dumps(status)  # nothing of what it sent lands in status
        assert cluster.wait_event("liar", "ProgressRefused").type == "Warning"
        liar.answer = json.dumps({"event": "progress", "batchId": "not a number"}).encode()
        status = cluster.wait_status("liar", lambda s: "not a progress record" in degraded(s).get("message", ""), timeout=30,
                                     what="the malformed record refused")  # fmt: skip
        assert "not a number" not in json.dumps(status)
        loud_now = cluster.status("loud")
        assert degraded(loud_now).get("status") == "False" and age_s(loud_now["progress"]) <= 10 + INTERVAL_S + 5
        assert job.proc.poll() is None  # the loud job ran on throughout
        reads = counters(metrics_port, "streamq_progress_reads_total")  # by (channel, result)
        assert reads.get(("endpoint", "ok"), 0) > 30 and reads.get(("endpoint", "refused"), 0) >= 2, reads
        # before its job listens, a driver is read from its log (log-fallback): a few reads at the start only
        assert reads.get(("log-fallback", "none"), 0) + reads.get(("log-fallback", "ok"), 0) < reads[("endpoint", "ok")] / 3
        # a read while nothing else changed is a progress-only pass (no GET, no LIST): most of them here
        passes = {kind: n for (kind,), n in counters(metrics_port, "streamq_passes_total").items()}
        print(f"passes by kind: {passes}")
        assert passes.get("progress", 0) > passes.get("full", 0), passes
    finally:
        liar.stop()
        job.stop()
