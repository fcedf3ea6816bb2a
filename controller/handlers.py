"""kopf wiring (I/O only): one reconciler per StreamingQuery, woken by events.

* ``reconciler`` - a daemon per StreamingQuery: reconcile once, then sleep until
  something changes (the query, one of its driver pods or SparkApplications) or
  a decided delay passes (a backoff, the stable period, a resync). One loop per
  query means reconciles of one query never overlap.
* ``query_changed`` / ``driver_changed`` / ``spark_app_changed`` - wake it up.
* ``configure`` - settings, clients, metrics; ``liveness`` - the probe.

The kube client is configured at startup, never at import.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kopf
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from contract import GROUP, LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_QUERY, MANAGED_BY, PLURAL, VERSION
from controller import names
from controller.act import Log
from controller.config import Settings
from controller.decide import ScaleExecutors
from controller.kube import SPARK_GROUP, SPARK_PLURAL, SPARK_VERSION, Kube, api_message
from controller.metrics import Metrics
from controller.progress_read import next_read
from controller.reconcile import Seen, expected_after_write, progress_pass, reconcile_once

MAX_ERROR_DELAY_S = 60.0
CONFLICT_DELAY_S = 0.2
EARLY_WAKE_S = 0.25  # a read due this soon is read now: else a timer that fires early costs a pass, then another
RECONCILE_WORKERS = 32  # threads for blocking reconciles, and as many API connections
DRIVER_LABELS = {LABEL_MANAGED_BY: MANAGED_BY, LABEL_COMPONENT: names.COMPONENT_DRIVER}


class Wakers:
    """One asyncio.Event per query; events set it, the query's reconciler waits on it."""

    def __init__(self) -> None:
        self._events: dict[tuple[str, str], asyncio.Event] = {}

    def register(self, namespace: str, name: str) -> asyncio.Event:
        return self._events.setdefault((namespace, names.query_label(name)), asyncio.Event())

    def unregister(self, namespace: str, name: str) -> None:
        self._events.pop((namespace, names.query_label(name)), None)

    def wake(self, namespace: str | None, label: str | None) -> None:
        event = self._events.get((namespace or "", label or ""))
        if event is not None:
            event.set()

    def __len__(self) -> int:
        return len(self._events)


def _new_api_client() -> client.ApiClient:
    try:
        config.load_incluster_config()
        configuration = client.Configuration.get_default_copy()
    except config.ConfigException:
        configuration = client.Configuration()
        config.load_kube_config(client_configuration=configuration)
    configuration.connection_pool_maxsize = RECONCILE_WORKERS
    return client.ApiClient(configuration)


class _QuietWakeups(logging.Filter):
    """Drops kopf's "Handler 'query_changed' succeeded." (and the drivers'): one INFO line per watch event,
    each status write one, thousands a minute with many queries; the handlers only wake a reconciler."""

    QUIET = tuple(f"Handler {name!r} succeeded." for name in ("query_changed", "driver_changed", "spark_app_changed"))

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno == logging.INFO and isinstance(record.msg, str) and record.msg in self.QUIET)


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, logger: Log, **_: Any) -> None:
    settings.persistence.finalizer = names.FINALIZER
    settings.posting.reporting_component = "streamq-operator"
    settings.posting.loggers = False  # events are explicit (kopf.event), log lines stay logs
    objects = logging.getLogger("kopf.objects")
    if not any(isinstance(f, _QuietWakeups) for f in objects.filters):  # once, though startup may run again
        objects.addFilter(_QuietWakeups())
    settings.watching.label_selectors["pods"] = names.driver_pod_selector()  # server-side filter
    settings.watching.label_selectors[SPARK_GROUP, SPARK_PLURAL] = names.driver_pod_selector()
    settings.execution.max_workers = 32
    memo.settings = Settings.from_env()
    memo.kube = Kube(_new_api_client())
    # Reconciles are blocking client calls. asyncio's default pool has cpu+4 threads (6 on a
    # 2-core node), which queued 200 first reconciles for ~7 s; size it like the connection pool.
    memo.executor = ThreadPoolExecutor(max_workers=RECONCILE_WORKERS, thread_name_prefix="reconcile")
    memo.wakers = Wakers()
    memo.metrics = getattr(memo, "metrics", None) or Metrics()
    port = getattr(memo, "metrics_port", None)
    if port:
        memo.metrics.serve(int(port))
        logger.info("metrics on :%s/metrics", port)
    logger.info("job image %s; spark %s", memo.settings.job_image, memo.settings.spark_version)


@kopf.on.cleanup()
def release(memo: kopf.Memo, **_: Any) -> None:
    executor = getattr(memo, "executor", None)
    if executor is not None:
        executor.shutdown(wait=False, cancel_futures=True)


@kopf.on.probe(id="reconcilers")
def liveness(memo: kopf.Memo, **_: Any) -> int:
    return len(memo.wakers) if hasattr(memo, "wakers") else 0


@kopf.on.event(GROUP, VERSION, PLURAL)
async def query_changed(name: str, namespace: str | None, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    expected = memo.kube.status_expected.get((namespace, name)) if namespace is not None else None
    if (
        expected is not None
        and not body.get("metadata", {}).get("deletionTimestamp")
        and expected == expected_after_write(dict(body), dict(body.get("status") or {}))
    ):
        return  # the echo of our own status write: another pass would find what it wrote
    memo.wakers.wake(namespace, names.query_label(name))


@kopf.on.event("pods", labels=DRIVER_LABELS)
async def driver_changed(labels: Mapping[str, str], namespace: str | None, memo: kopf.Memo, **_: Any) -> None:
    memo.wakers.wake(namespace, labels.get(LABEL_QUERY))


@kopf.on.event(SPARK_GROUP, SPARK_VERSION, SPARK_PLURAL, labels=DRIVER_LABELS)
async def spark_app_changed(labels: Mapping[str, str], namespace: str | None, memo: kopf.Memo, **_: Any) -> None:
    memo.wakers.wake(namespace, labels.get(LABEL_QUERY))


@kopf.daemon(GROUP, VERSION, PLURAL, id="reconciler", cancellation_timeout=5.0, backoff=5.0)
async def reconciler(
    name: str,
    namespace: str | None,
    body: kopf.Body,
    memo: kopf.Memo,
    logger: Log,
    stopped: kopf.DaemonStopped,
    **_: Any,
) -> None:
    if namespace is None:  # kopf's None is for cluster-scoped objects; the CRD is namespaced
        raise kopf.PermanentError("a StreamingQuery has a namespace")
    waker = memo.wakers.register(namespace, name)
    settings: Settings = memo.settings
    loop = asyncio.get_running_loop()
    next_progress = 0.0
    seen: Seen | None = None  # what the last pass read and wrote
    full_due = 0.0  # when a full pass is due whatever happens: the resync, or a time the decision named
    errors = 0
    try:
        # kopf sets `stopped` when the query is deleted or the operator stops, and cancels
        # the daemon cancellation_timeout later: leaving at once spares the wait and the
        # "cancelled" warning.
        while not stopped.is_set():
            woken = waker.is_set()
            waker.clear()
            read_progress = loop.time() >= next_progress - EARLY_WAKE_S  # a timer may fire a little early
            # Nothing woke it and no full pass is due: only the record is new, so only it is read
            # (reconcile.progress_pass; None: the decision is more than a status, so a full pass).
            cheap = seen is not None and read_progress and not woken and loop.time() < full_due
            try:
                outcome = None
                if cheap:
                    assert seen is not None
                    work = functools.partial(progress_pass, memo.kube, seen, logger=logger)
                    outcome = await loop.run_in_executor(memo.executor, work)
                full = outcome is None
                if full:
                    work = functools.partial(
                        reconcile_once, memo.kube, settings, namespace, name, with_progress=read_progress, logger=logger
                    )
                    outcome = await loop.run_in_executor(memo.executor, work)
            except (ApiException, urllib3.exceptions.HTTPError) as exc:
                errors += 1
                seen = None
                delay = min(MAX_ERROR_DELAY_S, 2.0**errors)
                message = api_message(exc) if isinstance(exc, ApiException) else str(exc)
                logger.warning("reconcile failed (%s); retrying in %.0fs", message, delay)
                memo.metrics.errors.inc()
                await _sleep(waker, stopped, delay)
                continue
            errors = 0
            if outcome is None:
                logger.info("the query is gone or being deleted; its children go with it")
                return
            if read_progress:
                next_progress = next_read(loop.time(), settings.progress_interval_s, f"{namespace}/{name}")
            decision = outcome.decision
            seen = outcome.seen
            look_again = settings.resync_interval_s  # the resync, or sooner when the decision named a time
            if decision.requeue_after is not None:
                look_again = min(look_again, decision.requeue_after)
            full_due = loop.time() + look_again if full else min(full_due, loop.time() + look_again)
            memo.metrics.passes.labels(kind="full" if full else "progress").inc()
            # A status write that lost a race is decided again at once, events included: post them once.
            for event in () if outcome.conflict else decision.events:
                kopf.event(body, type=event.type, reason=event.reason, message=event.message)
                logger.info("%s %s: %s", event.type, event.reason, event.message)
            memo.metrics.observe(namespace, name, decision.verb, decision.status.phase, decision.restarted,
                                 decision.status.progress)  # fmt: skip
            if not outcome.conflict:
                auto = decision.status.autoscaling
                memo.metrics.sized(namespace, name, decision.status.executors, auto.recommended_executors if auto else None,
                                   [(a.before, a.executors) for a in decision.actions if isinstance(a, ScaleExecutors)])  # fmt: skip
            if outcome.progress is not None:
                memo.metrics.progress_reads.labels(channel=outcome.progress.channel, result=outcome.progress.result).inc()
            delay = CONFLICT_DELAY_S if outcome.conflict else look_again
            if decision.status.phase is not None and decision.status.phase.value == "Running":
                delay = min(delay, next_progress - loop.time())
            await _sleep(waker, stopped, max(delay, 0.05))
    finally:
        memo.wakers.unregister(namespace, name)
        memo.metrics.forget(namespace, name)
        memo.kube.status_expected.pop((namespace, name), None)


async def _sleep(waker: asyncio.Event, stopped: kopf.DaemonStopped, seconds: float) -> None:
    """Until woken, stopped, or `seconds` pass."""
    waits = {asyncio.ensure_future(waker.wait()), asyncio.ensure_future(stopped.wait())}
    try:
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
