"""The job's watchdog: a thread that looks at the query from outside Spark.

Every ``period_s`` it reads the checkpoint (the last commit and its offsets),
asks the brokers whether they answer, how many partitions the source has and
its latest offsets, and turns that into a progress record (lag per partition,
health) and, when the query cannot go on, a reason to stop it:

    broker silent for longer than the limit    QUERY_FAILED
    partitions grew beyond the task slots      PARTITIONS_CHANGED (auto-sized) / INVALID_SPEC
    no commit while input waited (Stalled)     STALLED, when spec.health.onStall is restart

``Watch`` is the pure part (observations in, a record and a verdict out);
``Watchdog`` does the reading, on its own thread. The run loop acts on
``Watchdog.exit``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from app.checkpoints.reader import CheckpointError, CheckpointState, KafkaOffsets, read_checkpoint
from app.monitoring.health import (
    HealthState,
    StallClock,
    Verdict,
    compute_lag,
    judge,
    partitions_changed,
    rate_lag,
    rate_rows,
    starting_positions,
)
from app.monitoring.reporting import ListenerRates, ProgressSink, Rates, progress_record
from app.pipeline.kafka_checks import (
    KafkaEndpoint,
    PreflightError,
    admin_client,
    describe_topics,
    endpoints,
    list_offsets,
    source_partitions,
)
from contract import ExitCode
from contract.compat import Holds
from contract.progress import ProgressRecord, Recovered
from contract.spec import OnStall, QuerySpec

log = logging.getLogger("streamq.watchdog")
MIN_TICK_S = 1.0  # the listener's wake-ups never make looks more frequent than this


class Restarts(Protocol):
    """What the watchdog reports of the driver's restarts in place (app.driver.restarts.InPlaceRestarts)."""

    total: int
    last_reason: str | None


@dataclass(frozen=True)
class Observation:
    now: float  # monotonic seconds
    wall: float  # seconds since the epoch
    state: CheckpointState
    partitions: dict[str, int] | None = None  # None: the source broker did not answer
    latest: KafkaOffsets | None = None
    earliest: KafkaOffsets | None = None  # asked for when partitions appear without a known start
    unreachable: str | None = None  # a broker silent for longer than the limit


@dataclass
class Step:
    record: ProgressRecord | None = None
    exit: tuple[ExitCode, str] | None = None


@dataclass
class _Rates:
    """Rates from offset deltas, for continuous mode (Spark's listener is silent there)."""

    committed: tuple[float, int] | None = None  # (wall time, committed total) at the last new commit
    latest: tuple[float, int] | None = None  # (wall time, latest total) at the last report
    values: Rates = Rates()


class Watch:
    """The watchdog's judgement, from observations only (no I/O, no clock)."""

    def __init__(self, spec: QuerySpec, query: str, *, slots: int, partitions: dict[str, int], starting_offsets: str,
                 started_at: float, report_every_s: float = 10.0, recovered: Recovered | None = None,
                 restarts: Restarts | None = None):  # fmt: skip
        self.spec, self.query, self.slots = spec, query, slots
        self.restarts = restarts
        self.partitions = dict(partitions)  # as sized at start
        self.starting_offsets = starting_offsets
        self.report_every_s = report_every_s
        self.recovered = recovered
        self.stall_after_s = spec.stall_after_ms / 1000.0
        self.clock = StallClock(started_at)
        self.start: KafkaOffsets | None = None  # where partitions without a commit start
        self._last_report: float | None = None
        self._last_batch: int | None = None
        self._last_state: HealthState | None = None
        self._rates = _Rates()

    def needs_earliest(self, partitions: dict[str, int]) -> bool:
        known = self.start
        return known is None or any(p not in known.get(t, {}) for t, n in partitions.items() for p in range(n))

    def _starts(self, obs: Observation) -> KafkaOffsets:
        if obs.earliest is not None and obs.latest is not None:
            if self.start is None and not obs.state.has_commits:
                fresh = starting_positions(self.starting_offsets, obs.earliest, obs.latest)
            else:  # partitions without a commit in a running (or resumed) query are read from the earliest
                fresh = obs.earliest
            merged = {t: dict(parts) for t, parts in (self.start or {}).items()}
            for t, parts in fresh.items():
                for p, o in parts.items():
                    merged.setdefault(t, {}).setdefault(p, o)
            self.start = merged
        return self.start or {}

    def _rates_now(self, obs: Observation, rates: Rates) -> Rates:
        if rates:  # Spark's own numbers (micro-batch, realTime)
            return rates
        r = self._rates
        committed = self._committed_rows(obs.state)
        if obs.state.last_committed != self._last_batch and obs.state.last_committed is not None:
            if r.committed is not None and obs.wall > r.committed[0]:
                rows = committed - r.committed[1]
                r.values = replace(r.values, num_input_rows=rows,
                                   processed_rows_per_second=round(rows / (obs.wall - r.committed[0]), 3))  # fmt: skip
            r.committed = (obs.wall, committed)
        if obs.latest is not None:
            latest = sum(sum(p.values()) for p in obs.latest.values())
            if r.latest is not None and obs.wall - r.latest[0] >= 1.0:
                r.values = replace(r.values, input_rows_per_second=round((latest - r.latest[1]) / (obs.wall - r.latest[0]), 3))
                r.latest = (obs.wall, latest)
            elif r.latest is None:
                r.latest = (obs.wall, latest)
        return r.values

    def _committed_rows(self, state: CheckpointState) -> int:
        rate = self.spec.source.rate
        if rate is not None:
            return rate_rows(state.committed_offsets, rate.num_partitions, rate.rows_per_second) or 0
        return sum(sum(p.values()) for p in state.kafka_offsets().values())

    def step(self, obs: Observation, rates: Rates | None = None) -> Step:
        state = obs.state
        lag = None
        rate = self.spec.source.rate
        if obs.latest is not None:
            lag = compute_lag(obs.latest, state.kafka_offsets(), self._starts(obs))
        elif rate is not None:  # no broker to ask: the spec's rate says what is due
            lag = rate_lag(state.committed_offsets, rate.num_partitions, rate.rows_per_second, obs.wall, state.committed_at)
        total = sum(sum(p.values()) for p in lag.values()) if lag is not None else None
        waiting = self.clock.observe(obs.now, state.last_committed, total)
        verdict = judge(waiting, self.stall_after_s, total, state.last_committed)
        step = Step()
        if obs.unreachable:
            step.exit = (ExitCode.QUERY_FAILED, obs.unreachable)
        elif obs.partitions is not None and (
            changed := partitions_changed(self.spec, self.partitions, obs.partitions, self.slots)
        ):
            step.exit = changed
        elif verdict.state is HealthState.STALLED and self.spec.health.on_stall is OnStall.RESTART:
            step.exit = (ExitCode.STALLED, f"stalled: {verdict.message}")
        current_rates = self._rates_now(obs, rates or Rates())
        due = (
            self._last_report is None
            or state.last_committed != self._last_batch
            or verdict.state != self._last_state
            or obs.now - self._last_report >= self.report_every_s
            or step.exit is not None
        )
        self._last_batch, self._last_state = state.last_committed, verdict.state
        if due:
            self._last_report = obs.now
            step.record = self.record(state, verdict, obs.wall, rates=current_rates, lag=lag,
                                      partitions=obs.partitions if obs.partitions is not None else self.partitions)  # fmt: skip
        return step

    def record(self, state: CheckpointState, verdict: Verdict, wall: float, *, rates: Rates | None = None,
               lag: KafkaOffsets | None = None, partitions: dict[str, int] | None = None) -> ProgressRecord:  # fmt: skip
        restarts = self.restarts
        return progress_record(
            query=self.query, mode=self.spec.mode, state=state, rates=rates or Rates(), lag=lag,
            partitions=self.partitions if partitions is None else partitions, slots=self.slots,
            verdict=verdict, stall_after_s=self.stall_after_s, holds=Holds.of(state).to_wire(),
            recovered=self.recovered, now=wall,
            in_place_restarts=restarts.total if restarts is not None else None,
            last_in_place_restart=restarts.last_reason if restarts is not None else None,
        )  # fmt: skip

    def waiting_for_source(self, state: CheckpointState, message: str, waited_s: float, wall: float) -> ProgressRecord:
        """The record while the query is stopped on a broker that does not answer."""
        return self.record(state, Verdict(HealthState.SOURCE_UNAVAILABLE, message, waited_s), wall)


class Watchdog(threading.Thread):
    def __init__(self, watch: Watch, spec: QuerySpec, sink: ProgressSink, *, broker_timeout_s: float,
                 period_s: float = 2.0, rates: ListenerRates | None = None, wake: threading.Event | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time):  # fmt: skip
        super().__init__(name="streamq-watchdog", daemon=True)
        self.watch, self.spec, self.sink = watch, spec, sink
        self.broker_timeout_s, self.period_s = broker_timeout_s, period_s
        self.request_timeout_s = max(5.0, period_s)  # a loaded broker or driver answers slowly, not never
        self.rates = rates or ListenerRates()
        self.clock, self.wall = clock, wall
        self.wake = wake or threading.Event()  # set by the listener when a batch ends
        self.exit: tuple[ExitCode, str] | None = None
        self._stopped = threading.Event()
        self._endpoints = endpoints(spec)
        self._clients = {e.role: None for e in self._endpoints}  # (admin, its error list), made on first use
        self._last_ok = {e.role: clock() for e in self._endpoints}

    def _client(self, endpoint: KafkaEndpoint):
        if self._clients.get(endpoint.role) is None:
            errors: list = []
            self._clients[endpoint.role] = (admin_client(endpoint, errors), errors)
        return self._clients[endpoint.role]

    def observe(self) -> Observation:

        try:
            state = read_checkpoint(self.spec.checkpoint.location)
        except CheckpointError:
            state = CheckpointState(location=self.spec.checkpoint.location, exists=False)
        partitions = latest = earliest = None
        unreachable = None
        for endpoint in self._endpoints:
            admin, errors = self._client(endpoint)
            try:
                topics = describe_topics(endpoint, self.request_timeout_s, admin, errors)
                self._last_ok[endpoint.role] = self.clock()
            except PreflightError:
                silent = self.clock() - self._last_ok[endpoint.role]
                if silent > self.broker_timeout_s:
                    unreachable = (f"Kafka {endpoint.role} {endpoint.bootstrap_servers} unreachable "
                                   f"for {silent:.0f}s (limit {self.broker_timeout_s:g}s)")  # fmt: skip
                continue
            if endpoint.role != "source":
                continue
            partitions = source_partitions(self.spec, topics)
            try:
                latest = list_offsets(endpoint, partitions, "latest", self.request_timeout_s, admin)
                if self.watch.needs_earliest(partitions):
                    earliest = list_offsets(endpoint, partitions, "earliest", self.request_timeout_s, admin)
            except Exception as exc:  # noqa: BLE001 - a leader moving, no answer in time (KafkaException, a future's timeout): lag is unknown this time
                log.debug("offsets unknown this time: %s", exc)
                latest = earliest = None
        return Observation(now=self.clock(), wall=self.wall(), state=state, partitions=partitions,
                           latest=latest, earliest=earliest, unreachable=unreachable)  # fmt: skip

    def tick(self) -> Step:
        step = self.watch.step(self.observe(), self.rates.latest())
        if step.record is not None:
            self.sink.emit(step.record)
        if step.exit is not None and self.exit is None:
            self.exit = step.exit
        return step

    def run(self) -> None:
        while not self._stopped.is_set():
            started = self.clock()
            try:
                step = self.tick()
            except Exception:  # never let the watchdog die silently: say why, try again
                log.exception("watchdog tick failed")
                step = Step()
            if step.exit is not None:
                return
            self.wake.wait(self.period_s)
            self.wake.clear()
            # a batch every few milliseconds must not become a look (and a record) every few milliseconds
            rest = min(MIN_TICK_S, self.period_s) - (self.clock() - started)
            if rest > 0:
                self._stopped.wait(rest)

    def stop(self) -> None:
        self._stopped.set()
        self.wake.set()
