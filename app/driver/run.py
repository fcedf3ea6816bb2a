"""The job's lifecycle: check, start, watch, stop; exit with a code that says how it ended."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Self

from pydantic import Field

from app.checkpoints.reader import (
    CheckpointError,
    CheckpointState,
    S3Options,
    configure_s3,
    local_path,
    read_checkpoint,
    unwritable,
)
from app.console.lines import committed_summary, progress_line
from app.console.terminal import Terminal
from app.driver import executors
from app.driver.bluegreen import as_green, blue_committed
from app.driver.lease_holder import DriverLease
from app.driver.ready import mark_ready
from app.driver.resize import Resizer
from app.driver.restarts import InPlaceRestarts
from app.driver.starting_offsets import StartPlan, plan_start
from app.driver.warmup import running_tasks, warm_up
from app.driver.write_fence import FENCED_WRITE, WriteFence, fenced
from app.monitoring.endpoint import ProgressEndpoint
from app.monitoring.reporting import ListenerRates, ProgressSink, make_listener
from app.monitoring.watchdog import Watch, Watchdog
from app.pipeline.credentials import s3_credentials
from app.pipeline.failures import classify, one_line
from app.pipeline.kafka_checks import PreflightError, check_slots, preflight
from app.pipeline.plan import build_dataframe, build_writer
from app.pipeline.session import get_session, held_back, quiet_for_stop, spark_conf
from contract import (
    EXECUTORS_FILE_ENV,
    HANDOVER_ANNOTATION,
    POD_IP_ENV,
    PROGRESS_FILE_ENV,
    PROGRESS_PORT_ENV,
    RESUME_ANNOTATION,
    TERMINATION_LOG,
    ExitCode,
    failpoints,
)
from contract.compat import Holds, checkpoint_differences, choose_fresh_location, refusal
from contract.environment import EnvSettings
from contract.failpoints import Failpoint
from contract.load import QueryDocument
from contract.modes import Mode
from contract.problems import SpecError
from contract.progress import Recovered
from contract.resume import ResumeFrom
from contract.spec import MAX_EXECUTORS, IncompatibleChange, QuerySpec

log = logging.getLogger("streamq.job")
STOP_WAIT_S = 40.0  # a failed query's thread must end before it runs again in place (Spark's stopTimeout is 30 s)
SOURCE_PROBE_S = 5.0  # while waiting for a broker: one look, and one SourceUnavailable record, this often


class RunOptions(EnvSettings):
    """How the job runs: the driver pod's variables (read when asked, never at import), and the CLI's flags."""

    progress_file: str | None = Field(None, validation_alias=PROGRESS_FILE_ENV)
    progress_port: int | None = Field(None, ge=0, le=65535, validation_alias=PROGRESS_PORT_ENV)  # app.monitoring.endpoint
    pod_ip: str | None = Field(None, validation_alias=POD_IP_ENV)  # where the endpoint listens: the address the operator dials
    termination_log: str = Field(TERMINATION_LOG, validation_alias="STREAMQ_TERMINATION_LOG")
    broker_timeout_s: float = Field(30.0, validation_alias="STREAMQ_BROKER_TIMEOUT_SECONDS")
    preflight_timeout_s: float = 15.0
    starting_offsets: str | None = None  # used only when the checkpoint has nothing to resume from
    watch_period_s: float = Field(2.0, validation_alias="STREAMQ_WATCH_PERIOD_SECONDS")
    report_every_s: float = Field(10.0, validation_alias="STREAMQ_REPORT_PERIOD_SECONDS")
    human: bool = False  # progress as one readable line on a terminal instead of JSON (app.console.lines)
    executors_file: str | None = Field(None, validation_alias=EXECUTORS_FILE_ENV)  # app.driver.resize

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Self:
        """The driver pod's environment (os.environ when ``env`` is None); keyword arguments that are not None win."""
        found = super().from_env(env)
        return found.model_copy(update={k: v for k, v in overrides.items() if v is not None})


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
    """SIGTERM/SIGINT ask for a clean stop; the main loop acts on it.

    Installed again once the SparkSession exists: PySpark's SparkContext replaces the
    SIGINT handler with one that cancels every job and raises KeyboardInterrupt in the
    middle of whatever Py4J call is running, and the JVM is then shut down (its hook
    stops the SparkContext) under a query that is still running: an ERROR and a stack
    trace instead of a clean stop.
    """

    def __init__(self):
        self.event = threading.Event()
        self.signal_name: str | None = None

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum, _frame) -> None:
        self.signal_name = signal.Signals(signum).name
        self.event.set()


@dataclass(frozen=True)
class Job:
    """What every attempt of the query in this driver shares: the spec as the checkpoint gate
    left it, its sizing, the stop request, and where its progress goes."""

    doc: QueryDocument
    spec: QuerySpec
    options: RunOptions
    slots: int
    partitions: dict[str, int]
    stop: StopRequest
    progress: ProgressSink
    restarts: InPlaceRestarts
    fence: threading.Event | None = None  # set when this driver lost its Lease: stop at once
    rates: ListenerRates = field(default_factory=ListenerRates)  # Spark's listener's numbers
    wake: threading.Event = field(default_factory=threading.Event)  # the listener wakes whichever watchdog watches now


def _checkpoint_gate(spec: QuerySpec) -> tuple[QuerySpec, CheckpointState, str | None]:
    """Read the checkpoint and make sure this spec can resume from it. Returns the spec
    (with a fresh location when onIncompatibleChange asks for one), what the checkpoint
    holds, and a refusal message when it cannot be reused."""
    location = spec.checkpoint.location
    try:
        state = read_checkpoint(location)
    except CheckpointError as exc:  # e.g. s3a:// without fsspec: Spark reads it, we cannot check it
        log.warning("not checking the checkpoint: %s", exc)
        return spec, CheckpointState(location=location, exists=False), None
    differences = checkpoint_differences(Holds.of(state), spec) if state.exists else []
    if not differences:
        return spec, state, None
    if spec.checkpoint.on_incompatible_change is not IncompatibleChange.NEW_CHECKPOINT:
        return spec, state, refusal("; ".join(differences), location)
    fresh, state = choose_fresh_location(location, spec, read_checkpoint)
    log.warning("%s: onIncompatibleChange is newCheckpoint, using %s", "; ".join(differences), fresh)
    return spec.model_copy(update={"checkpoint": spec.checkpoint.model_copy(update={"location": fresh})}), state, None


def _move_aside(state: CheckpointState) -> None:
    """An unreadable checkpoint is kept for a post-mortem, out of Spark's way."""
    path = local_path(state.location)
    if path is None or not os.path.isdir(path):
        return
    target = f"{path.rstrip('/')}.unreadable-{int(time.time())}"
    os.rename(path, target)
    log.warning("moved the unreadable checkpoint %s to %s", path, target)


def run(doc: QueryDocument, options: RunOptions | None = None) -> ExitCode:
    options = options or RunOptions.from_env()
    spec = doc.spec
    try:
        # an s3a:// checkpoint's store, for the checkpoint gate and the watchdog's reads (keys from the mounted Secret)
        configure_s3(S3Options.of(spec.checkpoint.s3, s3_credentials(spec.checkpoint.s3)))
        partitions = preflight(spec, options.preflight_timeout_s)
        if failpoints.active(Failpoint.SKIP_SLOT_CHECK):  # tests: let Spark hang, for the watchdog to see
            slots = spec.runtime.task_slots(spec.mode, sum(partitions.values()))
        else:
            slots = check_slots(spec, partitions)
    except PreflightError as exc:
        return finish(exc.code, str(exc), options)
    except SpecError as exc:  # e.g. a credentials file that is not there
        return finish(ExitCode.INVALID_SPEC, str(exc), options)
    if partitions:
        log.info(
            "source partitions: %s; task slots: %d%s", partitions, slots, " (sized for them)" if spec.runtime.auto_sized else ""
        )

    cannot_write = unwritable(spec.checkpoint.location)
    if cannot_write:
        return finish(ExitCode.CHECKPOINT_UNWRITABLE, cannot_write, options)
    stop = StopRequest()
    stop.install()
    lease, spark, held = DriverLease.from_env(), None, 0
    if lease is not None:
        # The standby's head start: the JVM and SparkSession (most of a restart) before the wait;
        # its executors only once it holds the Lease (app.driver.executors).
        held = held_back(spark_conf(spec, slots))
        spark = get_session(spec, doc.name, slots, waiting=True)
        stop.install()
        if not lease.could_take():  # a standby (the Lease is held): its head start, until the Lease frees
            warm = warm_up(spark, spec, doc.name, lambda: stop.event.is_set() or lease.could_take(), tasks_run=not held)
            log.info("standby: %s", warm.describe())
            mark_ready("warm, waiting on the lease")  # a warm upgrade stops the running driver now
        waiting = lambda record, left: log.info("standing by: lease %s is held by %s (expires in %.0fs unless renewed)",  # noqa: E731
                                                lease.name, record.holder, left)  # fmt: skip
        if not lease.acquire(stop.event, on_wait=waiting):
            return finish(ExitCode.OK, f"{stop.signal_name} received while standing by", options)
    # The checkpoint is read only now: a standby reads what the driver before it committed.
    spec, state, refused = _checkpoint_gate(spec)
    if refused:
        _release(lease)
        return finish(ExitCode.INVALID_SPEC, refused, options)
    resume = (ResumeFrom(options.starting_offsets) if options.starting_offsets
              else ResumeFrom.from_annotation(doc.annotations.get(RESUME_ANNOTATION)))  # fmt: skip
    blue = doc.annotations.get(HANDOVER_ANNOTATION)
    handed = blue_committed(blue) if blue and not state.has_commits else None  # blue/green's green, first start
    plan = plan_start(state, handed or resume, partitions)
    if handed is not None:
        plan = as_green(plan, handed)
    if plan.note:
        log.warning("%s", plan.note) if plan.recovered else log.info("%s", plan.note)
    if plan.recovered and state.exists and not state.resumable:
        _move_aside(state)

    # Before the JVM inherits fds 1 and 2; stderr only when it is the terminal too (not `2>file`).
    terminal = Terminal(fds=(1, 2) if os.isatty(2) else (1,)).start() if options.human else None
    if terminal is not None:
        progress = ProgressSink(options.progress_file, stream=terminal, render=progress_line)
    else:
        progress = ProgressSink(options.progress_file)
    job = Job(doc, spec, options, slots, partitions, stop, progress,
              restarts=InPlaceRestarts(limit=spec.restart_policy.in_place_restarts),
              fence=lease.lost if lease is not None else None)  # fmt: skip
    endpoint = (ProgressEndpoint(progress, options.progress_port, host=options.pod_ip or "0.0.0.0").start()
                if options.progress_port is not None else None)  # fmt: skip
    try:
        return _run_query(job, plan, terminal, spark, lease, held)
    finally:
        _release(lease)  # the query is stopped: the standby may take over at once
        if endpoint is not None:
            endpoint.stop()
        if terminal is not None:
            terminal.close()


def _release(lease: DriverLease | None) -> None:
    if lease is not None and not lease.lost.is_set():
        lease.release()


def _run_query(job: Job, plan: StartPlan, terminal: Terminal | None, spark=None, lease: DriverLease | None = None,
               held_executors: int = 0) -> ExitCode:  # fmt: skip
    spec, options, stop = job.spec, job.options, job.stop
    if terminal is not None and 2 in terminal.fds:  # the job's log lines wait for the console's blocks too
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.setStream(terminal)
    if spark is None:
        spark = get_session(spec, job.doc.name, job.slots)
        stop.install()  # over PySpark's own SIGINT handler (see StopRequest)
    if lease is not None:
        writes = WriteFence.in_session(spark)  # the records themselves stop at the Lease deadline (app.driver.write_fence)
        if writes is not None:
            job = replace(job, spec=fenced(job.spec))
        lease.keep(on_lost=lambda reason: writes and writes.shut(), code=ExitCode.LEASE_LOST,  # the watch loop acts on job.fence
                   on_renewed=writes.extend_to if writes is not None else None)  # fmt: skip
        if held_executors:  # renewed meanwhile: the Lease stays this driver's while they start
            executors.start(spark, held_executors, stop.event, job.fence)
    if options.executors_file and spec.mode is Mode.MICRO_BATCH and spec.runtime.executors.instances > 0:
        # Bounded by the model's cap only: spec.autoscaling (maxExecutors) may be added or changed after this
        # driver started (it is not a run field), and whoever may write the pod's annotation may run pods anyway.
        Resizer(spark, options.executors_file, MAX_EXECUTORS, stop.event).start(
            held_executors or spec.runtime.executors.instances
        )
    if spec.mode is not Mode.CONTINUOUS:  # continuous queries emit no progress events
        spark.streams.addListener(make_listener(job.rates, job.wake))
    failpoints.arm_signalled_failure()
    starting, recovered = plan.starting_offsets, plan.recovered
    while True:
        run = _Attempt(job)
        code, reason = run.start_and_watch(spark, starting, recovered)
        if stop.event.is_set():
            break
        delay = job.restarts.after_failure(code, reason, read_checkpoint_quietly(spec.checkpoint.location).last_committed)
        if delay is None:
            return finish(code, reason, options)
        if not run.stopped(within_s=STOP_WAIT_S):  # never two runs of one query in one JVM: a new pod instead
            return finish(code, f"{reason} (the failed query did not stop within {STOP_WAIT_S:g}s)", options)
        log.warning(
            "query failed (%s); restarting it in place from the checkpoint in %gs (%s)", reason, delay, job.restarts.describe()
        )
        if not run.wait_for_source(reason) or stop.event.wait(delay):
            break
        recovered = None  # said once, by the first run

    try:
        stopped_cleanly = run.query is None or not run.query.isActive
    except Exception:  # noqa: BLE001 - the JVM got the signal too (a process group signalled) and is gone: py4j's error or a socket's
        stopped_cleanly = False
    if stopped_cleanly:
        # The query first, then Spark: stopping the SparkContext under a running query is
        # what makes Spark log "terminated with error" and its stack traces. The Lease goes
        # as soon as no task runs (nothing can write any more), not after Spark's own stop:
        # the driver of a warm upgrade waits on it.
        _stop_spark(spark, seconds=15, tasks_ended=lambda: _release(lease))
    summary = committed_summary(read_checkpoint_quietly(spec.checkpoint.location), spec.mode)
    return finish(ExitCode.OK, f"{stop.signal_name} received; {summary}", options)


class _Attempt:
    """One start of the query in the driver's SparkSession, watched until it ends."""

    def __init__(self, job: Job):
        self.job = job
        self.query = None
        self.watch: Watch | None = None

    def start_and_watch(self, spark, starting_offsets: str | None, recovered: Recovered | None) -> tuple[ExitCode, str]:
        job = self.job
        spec, name = job.spec, job.doc.name
        try:
            df = build_dataframe(spark, spec, starting_offsets)
            self.query = build_writer(df, name, spec, namespace=self.job.doc.namespace).start()
        except Exception as exc:  # noqa: BLE001 - Spark, py4j and the plan each raise their own: every one ends the attempt with an exit code
            return classify(exc), one_line(str(exc))
        log.info("query %s started in %s mode (id %s, checkpoint %s)", name, spec.mode, self.query.id, spec.checkpoint.location)
        mark_ready("query started")
        starting = starting_offsets or (spec.source.kafka.starting_offsets if spec.source.kafka else "latest")
        self.watch = Watch(spec, name, slots=job.slots, partitions=job.partitions, starting_offsets=starting,
                           started_at=time.monotonic(), report_every_s=job.options.report_every_s, recovered=recovered,
                           restarts=job.restarts)  # fmt: skip
        watchdog = Watchdog(self.watch, spec, job.progress, broker_timeout_s=job.options.broker_timeout_s,
                            period_s=job.options.watch_period_s, rates=job.rates, wake=job.wake)  # fmt: skip
        watchdog.start()
        try:
            return _watch(self.query, job.stop, watchdog, quiet=lambda: quiet_for_stop(spark), fence=job.fence)
        finally:
            watchdog.stop()

    def stopped(self, within_s: float) -> bool:
        """Whether the failed query's own thread has ended (a stop times out after Spark's stopTimeout)."""

        deadline = time.monotonic() + within_s
        while True:
            try:
                if self.query is None or not self.query.isActive:
                    return True
            except Exception:  # noqa: BLE001 - the JVM is gone: py4j's error or a socket's
                return False
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)

    def wait_for_source(self, reason: str) -> bool:
        """Before a restart in place: wait until the brokers answer, saying so in progress records
        (the operator shows SourceUnavailable). False when a stop was asked for meanwhile."""
        job, started = self.job, time.monotonic()
        while not job.stop.event.is_set():
            try:
                preflight(job.spec, min(job.options.preflight_timeout_s, SOURCE_PROBE_S))
                return True
            except PreflightError as exc:
                waited = time.monotonic() - started
                log.warning("waiting for the source before restarting in place (%.0fs): %s", waited, exc)
                if self.watch is not None:
                    state = read_checkpoint_quietly(job.spec.checkpoint.location)
                    message = f"{exc}; the query stopped ({reason}) and restarts when the broker answers"
                    job.progress.emit(self.watch.waiting_for_source(state, message, waited, time.time()))
            job.stop.event.wait(min(job.options.report_every_s, 5.0))
        return False


def read_checkpoint_quietly(location: str) -> CheckpointState:
    try:
        return read_checkpoint(location)
    except CheckpointError:
        return CheckpointState(location=location, exists=False)


def _stop_spark(spark, seconds: float, tasks_ended=lambda: None) -> None:
    # A stopped continuous query's tasks are killed asynchronously; a SparkContext stopped
    # before they report back logs "Exception in statusUpdate" with a stack trace.
    deadline = time.monotonic() + seconds
    try:
        while running_tasks(spark) and time.monotonic() < deadline:
            time.sleep(0.05)
    except Exception as exc:  # noqa: BLE001 - the JVM went first (it shares a signal): py4j's error, or none left to ask; nothing to wait for
        log.debug("could not count running tasks: %s", exc)
    tasks_ended()
    # the process exits next anyway; the JVM goes with it
    _within(seconds, "streamq-stop-spark", spark.stop, lambda exc: log.debug("stopping Spark: %s", exc))


def _stop_within(query, seconds: float) -> None:
    # e.g. Spark's stopTimeout on a query stuck on a dead broker
    _within(seconds, "streamq-stop", query.stop, lambda exc: log.warning("stopping the query: %s", one_line(str(exc))))


def _within(seconds: float, name: str, stop: Callable[[], object], failed: Callable[[Exception], None]) -> None:
    """Call ``stop`` on a daemon thread and wait for it ``seconds`` at most: a stop that hangs
    (Spark's stopTimeout, a JVM on its way out) must not hold the driver's own stop or exit."""

    def call() -> None:
        try:
            stop()
        except Exception as exc:  # noqa: BLE001 - a failed stop is reported, never raised: the driver stops or exits next either way
            failed(exc)

    stopper = threading.Thread(target=call, name=name, daemon=True)
    stopper.start()
    stopper.join(seconds)


LEASE_LOST_REASON = "lost the driver lease: another driver may run the query; stopped"


def _watch(
    query, stop: StopRequest, watchdog: Watchdog, quiet=None, fence: threading.Event | None = None
) -> tuple[ExitCode, str]:
    """How the query ended: (code, one-line reason)."""

    while query.isActive:
        if fence is not None and fence.is_set():
            # Another driver may take the query over soon: stop writing now (the lease exits the
            # process hard if this takes longer than its grace).
            _stop_within(query, seconds=1)
            return ExitCode.LEASE_LOST, LEASE_LOST_REASON
        if stop.event.is_set():
            if quiet is not None:
                quiet()
            query.stop()  # run() reports what was committed, once Spark is stopped too
            return ExitCode.OK, "stop requested"
        if failpoints.signalled_failure():  # tests: a transient failure on demand (failpoint fail-on-sigusr2)
            _stop_within(query, seconds=10)
            return ExitCode.QUERY_FAILED, f"injected failure (failpoint {Failpoint.FAIL_ON_SIGUSR2})"
        if watchdog.exit:
            # A broker gone, a stalled or outgrown query: a graceful stop would wait out
            # Kafka's timeouts or the hang itself, and nothing more can be committed anyway.
            _stop_within(query, seconds=10)
            return watchdog.exit
        try:
            query.awaitTermination(0.5)
        except Exception:  # noqa: BLE001 - the query died (or its JVM did: py4j's or a socket's error); query.exception() below says how
            break
    if stop.event.is_set():  # the JVM shared our process group and got the signal first
        return ExitCode.OK, "stop requested"
    error = query.exception()
    if fence is not None and (fence.is_set() or (error is not None and FENCED_WRITE in str(error))):
        # The write fence failed a task at the Lease deadline before the renewal thread said the
        # Lease was lost: the query died of it, and must not be restarted in place (the standby runs).
        return ExitCode.LEASE_LOST, LEASE_LOST_REASON
    if error is None:
        return ExitCode.OK, "query finished (no more input for availableNow)"
    return classify(error), one_line(str(error))
