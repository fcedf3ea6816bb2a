"""The job's lifecycle: check, start, watch, stop; exit with a code that says how it ended."""

from __future__ import annotations

import logging
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path

from app.contract import PROGRESS_FILE_ENV, TERMINATION_LOG, ExitCode
from app.failures import classify, one_line
from app.pipeline.kafka_checks import BrokerWatch, PreflightError, preflight
from app.pipeline.plan import build_dataframe, build_writer
from app.pipeline.progress import CheckpointWatcher, ProgressSink, make_listener
from app.pipeline.session import get_session
from app.spec.load import QueryDocument
from app.spec.problems import SpecError

log = logging.getLogger("streamq.job")


@dataclass(frozen=True)
class RunOptions:
    progress_file: str | None = os.environ.get(PROGRESS_FILE_ENV)
    termination_log: str = os.environ.get("STREAMQ_TERMINATION_LOG", TERMINATION_LOG)
    broker_timeout_s: float = float(os.environ.get("STREAMQ_BROKER_TIMEOUT_SECONDS", "30"))
    preflight_timeout_s: float = 15.0
    starting_offsets: str | None = None  # overrides the spec's, e.g. to resume a lost checkpoint


def write_termination_log(path: str, message: str) -> None:
    """Kubernetes shows this file's content as the container's termination message."""
    target = Path(path)
    if target.parent.is_dir():
        try:
            target.write_text(message)
        except OSError:
            pass


def finish(code: ExitCode, reason: str, options: RunOptions) -> ExitCode:
    if code is ExitCode.OK:
        log.info("query stopped: %s", reason)
    else:
        log.error("query ended (%s, exit %d): %s", code.name, code.value, reason)
        write_termination_log(options.termination_log, f"{code.name}: {reason}")
    return code


class StopRequest:
    """SIGTERM/SIGINT ask for a clean stop; the main loop acts on it."""

    def __init__(self):
        self.event = threading.Event()
        self.signal_name: str | None = None

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum, _frame) -> None:
        self.signal_name = signal.Signals(signum).name
        self.event.set()


def run(doc: QueryDocument, options: RunOptions | None = None) -> ExitCode:
    options = options or RunOptions()
    spec = doc.spec
    try:
        partitions = preflight(spec, options.preflight_timeout_s)
    except PreflightError as exc:
        return finish(exc.code, str(exc), options)
    except SpecError as exc:  # e.g. a credentials file that is not there
        return finish(ExitCode.INVALID_SPEC, str(exc), options)
    if partitions:
        log.info("source partitions: %s; task slots: %d", partitions, spec.runtime.task_slots)

    stop = StopRequest()
    stop.install()
    spark = get_session(spec, doc.name)
    progress = ProgressSink(options.progress_file)
    if spec.mode != "continuous":
        spark.streams.addListener(make_listener(progress, doc.name, spec.mode))
    try:
        df = build_dataframe(spark, spec, options.starting_offsets)
        query = build_writer(df, doc.name, spec).start()
    except Exception as exc:  # Spark's analyser speaks through several exception types
        return finish(classify(str(exc)), one_line(str(exc)), options)
    log.info("query %s started in %s mode (id %s, checkpoint %s)", doc.name, spec.mode, query.id, spec.checkpoint.location)

    helpers: list = [BrokerWatch(spec, options.broker_timeout_s)]
    if spec.mode == "continuous":
        helpers.append(CheckpointWatcher(progress, doc.name, spec.mode, spec.checkpoint.location))
    for helper in helpers:
        helper.start()
    try:
        return _watch(query, stop, helpers[0], options)
    finally:
        for helper in helpers:
            helper.stop()


def _stop_within(query, seconds: float) -> None:
    stopper = threading.Thread(target=query.stop, name="streamq-stop", daemon=True)
    stopper.start()
    stopper.join(seconds)


def _watch(query, stop: StopRequest, broker: BrokerWatch, options: RunOptions) -> ExitCode:
    while query.isActive:
        if stop.event.is_set():
            query.stop()
            return finish(ExitCode.OK, f"{stop.signal_name} received", options)
        if broker.failure:
            # With the broker gone a graceful stop waits out Kafka's own timeouts;
            # nothing can be committed anyway, so do not wait long for it.
            _stop_within(query, seconds=5)
            return finish(ExitCode.QUERY_FAILED, broker.failure, options)
        try:
            query.awaitTermination(0.5)
        except Exception:  # the query died; query.exception() below says how
            break
    if stop.event.is_set():  # the JVM shared our process group and got the signal first
        return finish(ExitCode.OK, f"{stop.signal_name} received", options)
    error = query.exception()
    if error is None:
        return finish(ExitCode.OK, "query finished (no more input for availableNow)", options)
    message = str(error)
    return finish(classify(message), one_line(message), options)
