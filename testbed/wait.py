"""The one way tests, fixtures and benchmarks wait: poll a condition until it holds.

    pod = wait_for(lambda: find_pod(name), timeout=60, message=f"driver pod {name}")

Never a fixed sleep in its place: a sleep is either too short on a busy machine or
wasted time on an idle one. A test that must prove that something does *not*
happen sleeps on purpose and says so in a comment.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError, TimeoutError):
    """The condition did not hold in time (a test failure, and a TimeoutError for callers)."""


def wait_for(
    predicate: Callable[[], T],
    timeout: float = 30.0,
    message: str | Callable[[], str] = "condition",
    *,
    interval: float = 0.5,
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``predicate`` until it returns something truthy and return that value.

    It is called at once, then again every ``interval`` seconds at most (the first
    retries come sooner, down to 50 ms, so fast conditions are not slowed down).
    After ``timeout`` seconds it raises :class:`WaitTimeout` naming ``message`` (a
    callable is called then, for a diagnosis that costs something) and the last value
    seen. An exception of a type in ``ignore`` counts as "not yet" and is reported if
    it never succeeds; any other exception ends the wait at once.
    """
    deadline = time.monotonic() + timeout
    delay = min(0.05, interval)
    last: object = None
    while True:
        try:
            last = predicate()
        except ignore as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:g}s waiting for {_describe(message)} (last: {last!r:.2000})")
        time.sleep(delay)
        delay = min(delay * 2, interval)


def _describe(message: str | Callable[[], str]) -> str:
    if not callable(message):
        return message
    try:
        return message()
    except Exception as exc:  # noqa: BLE001 - the timeout is the failure to report
        return f"(describing the condition failed: {exc!r})"
