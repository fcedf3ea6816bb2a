"""A driver that waits on the query's Lease starts its executors only once it holds it.

Spark on Kubernetes starts spark.executor.instances executor pods as its SparkContext starts. A
standby (and a warm upgrade's new driver) starts its SparkSession before it waits on the Lease, its
head start: with the configured count it would hold a second set of executor pods, idle, for as
long as it stands by. So its session starts with none (app.pipeline.session.waiting_conf), it warms
up without running tasks (app.driver.warmup), and once it holds the Lease it asks Spark for its
executors (SparkContext.requestTotalExecutors, which Spark's Kubernetes scheduler backend turns
into executor pods) and starts the query when they have registered. A takeover then includes the
executors' start: a pod, its JVM, its registration.
"""

from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger("streamq.job")

REGISTERED_WITHIN_S = 120.0  # an image pulled for the first time on the node; then the query starts with what came
LOOK_EVERY_S = 0.25


def registered(spark) -> int:
    """Executors registered with this driver (the driver itself not counted)."""
    return spark.sparkContext._jsc.sc().getExecutorIds().size()


def request(spark, total: int) -> bool:
    """Ask Spark for ``total`` executors; False when its scheduler cannot start executors."""
    sc = spark.sparkContext
    no_locality = getattr(getattr(sc._jvm.scala.collection.immutable, "Map$"), "MODULE$").empty()
    return bool(sc._jsc.sc().requestTotalExecutors(total, 0, no_locality))


def start(spark, total: int, stop: threading.Event, fence: threading.Event | None = None,
          within_s: float = REGISTERED_WITHIN_S) -> None:  # fmt: skip
    """This driver holds the Lease now: its ``total`` executors, waited for ``within_s`` at most (then the
    query starts anyway and its tasks wait for the rest), or until a stop or a lost Lease."""
    started = time.monotonic()
    if not request(spark, total):
        log.warning("holding the lease: Spark's scheduler did not take the request for %d executors", total)
        return
    log.info("holding the lease: starting %d executors (none ran while this driver stood by)", total)
    while (count := registered(spark)) < total:
        waited = time.monotonic() - started
        if waited >= within_s:
            log.warning("%d of %d executors registered after %.0fs; starting the query, its tasks wait for the rest",
                        count, total, waited)  # fmt: skip
            return
        if stop.wait(LOOK_EVERY_S) or (fence is not None and fence.is_set()):
            return
    log.info("%d executors registered in %.1fs", count, time.monotonic() - started)
