"""The kopf wiring that can be checked without a cluster: settings, wake-ups."""

from __future__ import annotations

import asyncio
import logging

import kopf
import pytest
from kubernetes import client

from controller import handlers

pytestmark = pytest.mark.unit


def _resource(group: str, version: str, plural: str, kind: str) -> kopf.Resource:
    return kopf.Resource(group=group, version=version, plural=plural, kind=kind, singular=kind.lower(),
                         namespaced=True, verbs=frozenset({"list", "watch"}))  # fmt: skip


def _stopped() -> asyncio.Event:
    """A stand-in for the ``kopf.DaemonStopped`` a daemon gets: ``_sleep`` uses only its
    public ``wait()`` and ``is_set()``, which an asyncio.Event has too (kopf offers no
    public way to build or set a real one outside a running daemon)."""
    return asyncio.Event()


def test_startup_settings(monkeypatch):
    monkeypatch.setattr(handlers, "_new_api_client", lambda: client.ApiClient(client.Configuration()))
    settings, memo = kopf.OperatorSettings(), kopf.Memo(metrics_port=0)
    handlers.configure(settings=settings, memo=memo, logger=logging.getLogger("test"))
    assert settings.persistence.finalizer == "streamq.io/finalizer"
    assert settings.posting.loggers is False
    pods = _resource("", "v1", "pods", "Pod")
    assert list(settings.watching.label_selectors.collect(pods)) == [
        "streamq.io/component=driver,app.kubernetes.io/managed-by=streamq"
    ]
    queries = _resource("streamq.io", "v1alpha1", "streamingqueries", "StreamingQuery")
    assert list(settings.watching.label_selectors.collect(queries)) == []  # every query is watched
    assert memo.settings.job_image and len(memo.wakers) == 0
    assert handlers.liveness(memo=memo) == 0
    # Reconciles get their own pool, not asyncio's default (cpu + 4 threads).
    assert memo.executor._max_workers == handlers.RECONCILE_WORKERS == 32
    handlers.release(memo=memo)
    with pytest.raises(RuntimeError):
        memo.executor.submit(print)


def test_wakers_wake_the_right_query():
    async def scenario():
        wakers = handlers.Wakers()
        a, b = wakers.register("ns", "a"), wakers.register("ns", "b")
        wakers.wake("ns", "a")
        wakers.wake("other", "b")
        wakers.wake(None, None)
        assert a.is_set() and not b.is_set()
        await handlers._sleep(b, _stopped(), 0.01)  # times out quietly
        wakers.unregister("ns", "a")
        assert len(wakers) == 1

    asyncio.run(scenario())


def test_sleep_ends_when_woken_when_stopped_or_after_its_time():
    async def scenario():
        loop = asyncio.get_running_loop()
        waker, stopped = asyncio.Event(), _stopped()

        started = loop.time()
        await handlers._sleep(waker, stopped, 0.05)
        assert 0.04 <= loop.time() - started < 1

        loop.call_later(0.05, waker.set)
        started = loop.time()
        await handlers._sleep(waker, stopped, 30)
        assert loop.time() - started < 1

        waker.clear()
        loop.call_later(0.05, stopped.set)
        started = loop.time()
        await handlers._sleep(waker, stopped, 30)
        assert loop.time() - started < 1 and stopped.is_set()
        await asyncio.sleep(0)  # cancelled tasks finish on the next turn of the loop
        assert len(asyncio.all_tasks()) == 1  # the waits it started are gone

    asyncio.run(scenario())


def test_kopfs_line_per_wakeup_is_dropped_and_every_other_line_kept():
    import logging

    from controller.handlers import _QuietWakeups

    def record(level: int, message: str) -> logging.LogRecord:
        return logging.LogRecord("kopf.objects", level, __file__, 1, message, None, None)

    quiet = _QuietWakeups()
    assert not quiet.filter(record(logging.INFO, "Handler 'query_changed' succeeded."))
    assert not quiet.filter(record(logging.INFO, "Handler 'driver_changed' succeeded."))
    assert quiet.filter(record(logging.INFO, "Handler 'reconciler' succeeded."))  # the daemon's own: rare, kept
    assert quiet.filter(record(logging.ERROR, "Handler 'query_changed' failed with an exception."))
    assert quiet.filter(record(logging.INFO, "Normal DriverCreated: driver q-driver-1 created"))
