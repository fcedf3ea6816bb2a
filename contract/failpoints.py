"""Failure injection for tests: named points where the job or the operator fails on purpose.

For tests only. Off unless the ``STREAMQ_FAILPOINT`` environment variable names a
point; it is read each time a point is asked about, never at import, so a test
sets it in the environment of the one process it wants to fail. A name that is
not a point is refused (``UnknownFailpoint``) rather than ignored, so a typo in
a test cannot pass as a test of the happy path.

    exit-after-create  the operator exits (137) right after creating a driver and
                       before recording it in the status: the worst moment to die.
                       The next operator must adopt that driver, not start a second.
    skip-slot-check    the job skips its check that there is a task slot for every
                       source partition, so a long-running query really hangs and
                       the watchdog (and the operator's stall report) must see it.
    fail-on-sigusr2    the job fails its running query, as a transient failure would
                       (QUERY_FAILED), each time it gets SIGUSR2: restarts in place are
                       tested and measured without breaking a broker.
    kill-before-commit an exactlyOnce writer (app.pipeline.exactly_once) kills its own
                       process after its rows and marker reached the broker and before
                       it commits: writer 0 of every third batch, once per batch (a flag
                       file in the temp directory), so that the replay gets through.
    abandon-before-commit  the same writers, at the same moment, fail their task with an
                       error instead, their transaction left open (not aborted): the
                       batch's next attempt must fence it. (The producer cannot outlive
                       the task here: PySpark's daemon ends a worker whose task failed
                       with os._exit; a kept producer that another fenced is shown by
                       tests/integration/test_exactly_once.py at the broker.)
    half-write         writer 1 of the first such batch waits until writer 0 committed its
                       part, then fails its task the same way: the batch is half written,
                       for a test that restarts the query under another writer count.
"""

from __future__ import annotations

import os
import signal
import threading
from enum import StrEnum

ENV = "STREAMQ_FAILPOINT"


class Failpoint(StrEnum):
    EXIT_AFTER_CREATE = "exit-after-create"
    SKIP_SLOT_CHECK = "skip-slot-check"
    FAIL_ON_SIGUSR2 = "fail-on-sigusr2"
    KILL_BEFORE_COMMIT = "kill-before-commit"
    ABANDON_BEFORE_COMMIT = "abandon-before-commit"
    HALF_WRITE = "half-write"


class UnknownFailpoint(ValueError):
    pass


def armed() -> Failpoint | None:
    """The point ``STREAMQ_FAILPOINT`` names, None when it is unset or empty."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return None
    try:
        return Failpoint(value)
    except ValueError:
        known = ", ".join(p.value for p in Failpoint)
        raise UnknownFailpoint(f"{ENV}={value!r} is not a failpoint (known: {known})") from None


def active(point: Failpoint) -> bool:
    """Whether this run was asked to fail at ``point``."""
    return armed() is point


_SIGNALLED = threading.Event()  # fail-on-sigusr2: a SIGUSR2 not yet acted on


def arm_signalled_failure() -> None:
    """fail-on-sigusr2: from now on each SIGUSR2 asks the running query to fail once (main thread only)."""
    if active(Failpoint.FAIL_ON_SIGUSR2):
        signal.signal(signal.SIGUSR2, lambda *_: _SIGNALLED.set())


def signalled_failure() -> bool:
    """Whether a SIGUSR2 arrived since the last call (always False unless armed)."""
    if not _SIGNALLED.is_set():
        return False
    _SIGNALLED.clear()
    return True
