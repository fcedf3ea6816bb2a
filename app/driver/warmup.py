"""A standby driver's head start beyond its JVM: its query, run once into nothing.

A promoted standby used to spend 5-9 s between ``query.start()`` and its first output
record (bench/results/recovery-continuous-standby-release-20261123T120755Z.json), where
a driver restarting its query in place, in a warm JVM, spends about 1.5 s
(docs/benchmarks.md, section 2). The difference is first-time work, seen in the job's
log of a cold start with Spark's INFO lines on (bench.recovery --keep-workdir and a
log4j2 file through --conf spark.driver.extraJavaOptions): ~3 s from start() to the
first epoch (planning, the Kafka offset reader's first admin round trips), 1.8 s of
driver-side code generation (Janino itself still interpreted), ~1 s to schedule the
first job, then the task-side code generation and the source's first consumers.

So, while it waits for the Lease, a standby starts its own query's plan, with its trigger,
on the real source from its latest offsets, into Spark's ``noop`` sink with a throwaway
checkpoint, lets its tasks run for a few seconds and stops it. The plan is the real one up to
the sink (``sink_frame``: the writer header too), so the code Spark generates for it is in
Spark's cache at the takeover; and the source's group is the query's own (``kafka.group.id``,
app.pipeline.plan), so Spark's consumer pool hands the real query's tasks the warm-up's
connected consumers. A hand-over on this machine showed three compilations (~340 ms) and new
consumers before and one compilation (97 ms) and pooled consumers after, with Spark's INFO log
on (bench.recovery --upgrade warm --keep-workdir). The real checkpoint and the
real sink are never touched, so this cannot write twice; it reads the source like any
consumer that commits nothing (Spark's Kafka source assigns partitions, no group).

A driver with executors has none while it waits (app.driver.executors): its warm-up ends once the
query's first job is submitted (planned, the source's offsets read, the driver's code generated);
its tasks, and what they compile, wait for the takeover.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from app.pipeline.plan import apply_trigger, build_dataframe, query_name, sink_frame
from contract.spec import QuerySpec

log = logging.getLogger("streamq.job")

RUN_TASKS_FOR_S = 3.0  # once the warm-up's tasks run: long enough for the per-record path to be compiled
GIVE_UP_AFTER_S = 120.0  # a source that never answers: the real start will say why (a loaded node needed 36-47 s)
SLOTS_FREE_WITHIN_S = 15.0
STOP_CHECK_S = 0.25
# Real-time mode takes only allowlisted sinks; the warm-up's noop sink is not one. The check is
# read when a query starts (its session is cloned then), so it is turned off for that call only.
REAL_TIME_SINK_CHECK = "spark.sql.streaming.realTimeMode.allowlistCheck"


@dataclass
class WarmUp:
    seconds: float
    tasks_ran_s: float = 0.0
    interrupted: bool = False  # stop_requested() said so
    error: str | None = None
    submitted: bool = False  # without executors: the first job was submitted, its tasks wait for them

    def describe(self) -> str:
        if self.error:
            return f"warming up the query failed after {self.seconds:.1f}s ({self.error}); it will start cold"
        if self.interrupted:
            return f"warm-up ended after {self.seconds:.1f}s: the Lease is free or a stop was asked"
        if self.submitted:
            return (f"query warmed up in {self.seconds:.1f}s (planned, its first job submitted; its tasks run "
                    "once this driver holds the Lease and its executors)")  # fmt: skip
        if not self.tasks_ran_s:
            return f"warming up the query gave up after {self.seconds:.1f}s, before its tasks ran"
        return f"query warmed up in {self.seconds:.1f}s (its tasks ran {self.tasks_ran_s:.1f}s into the noop sink)"


def active_jobs(spark) -> int:
    return len(spark.sparkContext.statusTracker().getActiveJobsIds())


def running_tasks(spark) -> int:
    infos = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    return sum(info.numRunningTasks() for info in infos)


def _first_line(error: object) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _start(spark, spec: QuerySpec, name: str, checkpoint: str):
    df = sink_frame(build_dataframe(spark, spec, "latest" if spec.source.kafka is not None else None), spec)
    writer = (df.writeStream.queryName(f"{query_name(name, spec)}-warm-up").format("noop")
              .outputMode(spec.effective_output_mode.value).option("checkpointLocation", checkpoint))  # fmt: skip
    check = spark.conf.get(REAL_TIME_SINK_CHECK, None)
    spark.conf.set(REAL_TIME_SINK_CHECK, "false")
    try:
        return apply_trigger(writer, spec).start()
    finally:
        if check is None:
            spark.conf.unset(REAL_TIME_SINK_CHECK)
        else:
            spark.conf.set(REAL_TIME_SINK_CHECK, check)


def _stop(spark, query) -> None:
    try:
        query.stop()
    except Exception as exc:  # noqa: BLE001 - the real query starts next whatever this stop raised; the slots are waited for below
        log.warning("stopping the warm-up query: %s", _first_line(exc))
    # A stopped continuous query's tasks end asynchronously, and the real query needs every
    # slot at once (one long-running task per partition): wait for them to be free.
    deadline = time.monotonic() + SLOTS_FREE_WITHIN_S
    while running_tasks(spark) and time.monotonic() < deadline:
        time.sleep(0.05)


def warm_up(spark, spec: QuerySpec, name: str, stop_requested: Callable[[], bool] = lambda: False,
            tasks_run: bool = True) -> WarmUp:  # fmt: skip
    """``stop_requested``: asked every STOP_CHECK_S; true ends the warm-up at once (a signal, or the
    Lease came free: the driver it stands by for died meanwhile). ``tasks_run``: False for a driver
    without its executors yet, whose warm-up ends once the first job is submitted."""
    started = time.monotonic()
    folder = tempfile.mkdtemp(prefix="streamq-warm-up-")
    query = None
    result = WarmUp(0.0)
    ran_since, checked = None, 0.0
    try:
        query = _start(spark, spec, name, folder)
        while query.isActive:
            now = time.monotonic()
            if now - checked >= STOP_CHECK_S:
                checked = now
                if stop_requested():
                    result.interrupted = True
                    break
            if not tasks_run and active_jobs(spark):
                result.submitted = True
                break
            if ran_since is None and running_tasks(spark):
                ran_since = now
            if (ran_since is not None and now - ran_since >= RUN_TASKS_FOR_S) or now - started >= GIVE_UP_AFTER_S:
                break
            time.sleep(0.1)
        error = query.exception()
        result.error = _first_line(error) if error else None
        result.tasks_ran_s = time.monotonic() - ran_since if ran_since else 0.0
    except Exception as exc:  # noqa: BLE001 - the real start says what is wrong, with the right exit code
        result.error = _first_line(exc)
    finally:
        if query is not None:
            _stop(spark, query)
        shutil.rmtree(folder, ignore_errors=True)
        result.seconds = time.monotonic() - started
    return result
