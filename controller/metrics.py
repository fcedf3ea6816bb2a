"""Prometheus metrics of the operator, served on their own port.

Per query, from the progress its driver last reported (the operator itself
reads neither the checkpoint nor Kafka): lag in total and per partition, the
time of the last commit and its age (computed when scraped), and whether the
driver reports a stall.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server
from prometheus_client.core import GaugeMetricFamily

from contract.progress import HealthState, ProgressRecord
from controller.phases import Phase
from controller.status import parse_time


class _CommitAge:
    """streamq_query_last_commit_age_seconds, computed at scrape time."""

    def __init__(self, commits: dict[tuple[str, str], float], clock: Callable[[], float]):
        self.commits, self.clock = commits, clock

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "streamq_query_last_commit_age_seconds",
            "Seconds since the query's last committed epoch/batch (as its driver last reported).",
            labels=["namespace", "query"],
        )
        now = self.clock()
        for (namespace, query), moment in sorted(self.commits.items()):
            family.add_metric([namespace, query], max(0.0, now - moment))
        yield family


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None, clock: Callable[[], float] = time.time):
        self.registry = registry or CollectorRegistry()
        self.reconciles = Counter(
            "streamq_reconciles", "Reconcile passes, by what they decided.", ["verb"], registry=self.registry
        )
        self.errors = Counter("streamq_reconcile_errors", "Reconcile passes that failed.", registry=self.registry)
        self.restarts = Counter(
            "streamq_query_restarts", "Driver restarts after failures.", ["namespace", "query"], registry=self.registry
        )
        self.progress_reads = Counter(
            "streamq_progress_reads",
            "Reads of running drivers' progress, by channel (endpoint; log: a driver without a progress port; "
            "log-fallback: one whose port did not answer) and result (ok, none, refused).",
            ["channel", "result"],
            registry=self.registry,
        )
        self.passes = Counter(
            "streamq_passes",
            "Reconcile passes, by kind: full (the query and its drivers read afresh), progress (only the running "
            "driver's record read, nothing else having changed: controller.reconcile.progress_pass).",
            ["kind"],
            registry=self.registry,
        )
        self.queries = Gauge("streamq_queries", "StreamingQueries by phase.", ["phase"], registry=self.registry)
        query = ["namespace", "query"]
        self.lag = Gauge("streamq_query_lag_records", "Records waiting in the query's source, all partitions.",
                         query, registry=self.registry)  # fmt: skip
        self.partition_lag = Gauge("streamq_query_partition_lag_records", "Records waiting in one source partition.",
                                   [*query, "topic", "partition"], registry=self.registry)  # fmt: skip
        self.last_commit = Gauge("streamq_query_last_commit_timestamp_seconds",
                                 "When the query last committed an epoch/batch (Unix time).", query, registry=self.registry)  # fmt: skip
        self.stalled = Gauge("streamq_query_stalled", "1 while the driver reports no commit although input waits.",
                             query, registry=self.registry)  # fmt: skip
        self.in_place = Gauge("streamq_query_in_place_restarts",
                              "Restarts of the query inside its running driver (no new pod), by the current driver.",
                              query, registry=self.registry)  # fmt: skip
        self.input_rate = Gauge("streamq_query_input_rows_per_second", "Rows/s arriving from the source, as the driver "
                                "last reported (status.progress.inputRowsPerSecond).", query, registry=self.registry)  # fmt: skip
        self.processed_rate = Gauge("streamq_query_processed_rows_per_second", "Rows/s the query processed per second "
                                    "of batch time (status.progress.processedRowsPerSecond).", query,
                                    registry=self.registry)  # fmt: skip
        self.executors = Gauge("streamq_query_executors", "Executors the query's running driver runs with "
                               "(status.executors).", query, registry=self.registry)  # fmt: skip
        self.recommended = Gauge("streamq_query_executors_recommended", "Executors autoscaling recommends "
                                 "(status.autoscaling.recommendedExecutors).", query, registry=self.registry)  # fmt: skip
        self.scalings = Counter("streamq_query_scalings", "Resizes of a running driver's executors in place "
                                "(autoscaling.recommendOnly false), by direction: up, down.", [*query, "direction"],
                                registry=self.registry)  # fmt: skip
        self._commits: dict[tuple[str, str], float] = {}
        self._partitions: dict[tuple[str, str], set[tuple[str, str]]] = {}
        self.registry.register(_CommitAge(self._commits, clock))
        self._phases: dict[tuple[str, str], str] = {}
        self._counts: Tally[str] = Tally()
        for phase in Phase:
            self.queries.labels(phase=phase.value).set(0)

    def observe(self, namespace: str, query: str, verb: str, phase: Phase | None, restarted: bool,
                progress: ProgressRecord | None = None) -> None:  # fmt: skip
        self.reconciles.labels(verb=verb).inc()
        if restarted:
            self.restarts.labels(namespace=namespace, query=query).inc()
        if phase is not None:
            self._phase((namespace, query), phase.value)
        if progress:
            self._progress(namespace, query, progress)

    def _progress(self, namespace: str, query: str, progress: ProgressRecord) -> None:
        key = (namespace, query)
        if progress.total_lag is not None:
            self.lag.labels(namespace, query).set(progress.total_lag)
        for gauge, rate in ((self.input_rate, progress.input_rows_per_second),
                            (self.processed_rate, progress.processed_rows_per_second)):  # fmt: skip
            if rate is not None:
                gauge.labels(namespace, query).set(rate)
        seen: set[tuple[str, str]] = set()
        for topic, parts in (progress.lag or {}).items():
            for partition, value in parts.items():
                self.partition_lag.labels(namespace, query, topic, str(partition)).set(value)
                seen.add((topic, str(partition)))
        for topic, partition in self._partitions.get(key, set()) - seen:
            self.partition_lag.remove(namespace, query, topic, partition)
        self._partitions[key] = seen
        moment = parse_time(progress.last_commit_time)
        if moment is not None:
            self._commits[key] = moment.timestamp()
            self.last_commit.labels(namespace, query).set(moment.timestamp())
        stalled = progress.health is not None and progress.health.state == HealthState.STALLED
        self.stalled.labels(namespace, query).set(1 if stalled else 0)
        if progress.in_place_restarts is not None:
            self.in_place.labels(namespace, query).set(progress.in_place_restarts)

    def sized(self, namespace: str, query: str, executors: int | None, recommended: int | None,
              resizes: Iterable[tuple[int, int]] = ()) -> None:  # fmt: skip
        """The executors a running query runs with and the recommendation; ``resizes``: (before, after) carried out."""
        for gauge, value in ((self.executors, executors), (self.recommended, recommended)):
            if value is not None:
                gauge.labels(namespace, query).set(value)
        for before, after in resizes:
            self.scalings.labels(namespace, query, "up" if after > before else "down").inc()

    def forget(self, namespace: str, query: str) -> None:
        key = (namespace, query)
        self._phase(key, None)
        self._commits.pop(key, None)
        for gauge in (self.restarts, self.lag, self.last_commit, self.stalled, self.in_place, self.executors, self.recommended):
            try:
                gauge.remove(namespace, query)
            except KeyError:
                pass
        for direction in ("up", "down"):
            try:
                self.scalings.remove(namespace, query, direction)
            except KeyError:
                pass
        for topic, partition in self._partitions.pop(key, set()):
            self.partition_lag.remove(namespace, query, topic, partition)

    def _phase(self, key: tuple[str, str], phase: str | None) -> None:
        """A query's phase is now ``phase`` (None: gone): streamq_queries follows, by the two phases that
        changed (a count over every query on every pass would grow with the queries)."""
        old = self._phases.pop(key, None)
        if phase is not None:
            self._phases[key] = phase
        if old == phase:
            return
        for value, change in ((old, -1), (phase, 1)):
            if value is not None:
                self._counts[value] += change
                self.queries.labels(phase=value).set(self._counts[value])

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:
        start_http_server(port, addr=addr, registry=self.registry)
