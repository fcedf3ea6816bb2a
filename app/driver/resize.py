"""A running micro-batch driver's executors, resized in place (autoscaling.recommendOnly false, issue #40).

The operator decides the size (controller.decide.autoscale) and writes it on this driver's pod, the
annotation EXECUTORS_ANNOTATION; a downward API volume shows it here as a file, which the kubelet
rewrites when the pod changes. Nothing listens in the driver and it needs no token: the pod is the
operator's to write, the file the kubelet's.

This thread reads the file and asks Spark's scheduler backend for that many executors
(SparkContext.requestTotalExecutors): Spark's Kubernetes backend starts executor pods for more, and
for fewer deletes the pods not yet registered. Registered executors beyond the total are removed
only while they run no task (CoarseGrainedSchedulerBackend.killExecutors with force false skips busy
ones), the newest first, looked at again every LOOK_EVERY_S: a batch is never cut by a scale-down, and
its state stays on the executors that stay. Spark's dynamic allocation does not do this for a
streaming query (SPARK-24815 has no merged implementation) and is off here.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from app.driver.executors import registered, request

log = logging.getLogger("streamq.job")

LOOK_EVERY_S = 1.0


def wanted(text: str, most: int) -> int | None:
    """The file's number of executors, None unless it is a whole number within 1..``most`` (what the
    operator writes; anything else is left as it is and said)."""
    value = text.strip()
    if not value.isascii() or not value.isdigit() or len(value) > 4:
        return None
    n = int(value)
    return n if 1 <= n <= most else None


def newest_first(executor_ids: list[str]) -> list[str]:
    """Spark numbers its executors as it starts them: the newest are removed first, the oldest (whose
    caches and shuffle files the longest history uses) stay."""
    return sorted(executor_ids, key=lambda e: (not e.isdigit(), int(e) if e.isdigit() else 0, e), reverse=True)


class Resizer:
    """Follows the executors file while the driver runs."""

    def __init__(self, spark, path: str, most: int, stop: threading.Event, every_s: float = LOOK_EVERY_S):
        self.spark, self.path, self.most, self.stop, self.every_s = spark, Path(path), most, stop, every_s
        self.total: int | None = None  # what this driver asked Spark for last
        self._said: str | None = None
        self._thread = threading.Thread(target=self._run, name="streamq-resize", daemon=True)

    def start(self, total: int) -> Resizer:
        self.total = total
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self.stop.wait(self.every_s):
            try:
                self.look()
            except Exception as exc:  # noqa: BLE001 - py4j, a JVM going away as the driver stops: say it, look again
                self._say(f"cannot resize the executors: {exc}")

    def look(self) -> None:
        try:
            text = self.path.read_text()
        except OSError as exc:
            return self._say(f"cannot read {self.path}: {exc}")
        n = wanted(text, self.most)
        if n is None:
            return self._say(f"{self.path} holds {text.strip()[:20]!r}, not a number of executors within 1..{self.most}")
        if n != self.total:
            if not request(self.spark, n):
                return self._say(f"Spark's scheduler did not take a request for {n} executors")
            log.info("resizing in place: %s -> %d executors (the operator's autoscaling)", self.total, n)
            self.total = n
        self._remove_idle_beyond(n)

    def _remove_idle_beyond(self, n: int) -> None:
        if registered(self.spark) <= n:
            return
        sc = self.spark.sparkContext
        ids = sc._jsc.sc().getExecutorIds().mkString(",").split(",")
        extra = newest_first([i for i in ids if i])[: len(ids) - n]
        java_ids = sc._jvm.java.util.ArrayList()
        for executor in extra:
            java_ids.add(executor)
        seq = sc._jvm.org.apache.spark.api.python.PythonUtils.toSeq(java_ids)
        # adjustTargetNumExecutors false: the total is already n; countFailures false; force false: not a busy one
        gone = sc._jsc.sc().schedulerBackend().killExecutors(seq, False, False, False).mkString(",")
        if gone:
            log.info("resizing in place: executors %s removed (idle; %d asked for)", gone, n)

    def _say(self, message: str) -> None:
        if message != self._said:  # once per cause, not every second
            log.warning("%s", message)
            self._said = message
