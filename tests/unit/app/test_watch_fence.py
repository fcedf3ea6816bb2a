"""A query the write fence killed is a lost Lease, not a failure to restart in place: the fence fails
tasks at the Lease deadline, and the renewal thread may say the Lease is lost only a moment later."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from app.driver.run import LEASE_LOST_REASON, StopRequest, _watch
from app.driver.write_fence import FENCED_WRITE
from contract import ExitCode

pytestmark = pytest.mark.unit


class DeadQuery:
    isActive = False

    def __init__(self, error: str | None):
        self.error = error

    def exception(self):
        return None if self.error is None else RuntimeError(self.error)


FENCED = f"Job aborted: io.streamq.fence.WriteFence$FencedWrite: {FENCED_WRITE} this driver's lease deadline passed 172 ms ago"


@pytest.mark.parametrize(("error", "fence_set", "expected"), [
    (FENCED, False, ExitCode.LEASE_LOST),  # the fence won the race with the renewal thread
    ("org.apache.kafka.common.errors.TimeoutException", True, ExitCode.LEASE_LOST),  # lost while it failed
    ("org.apache.kafka.common.errors.TimeoutException", False, ExitCode.QUERY_FAILED),
])  # fmt: skip
def test_a_query_that_died_of_the_fence_ends_as_a_lost_lease(error, fence_set, expected):
    fence = threading.Event()
    if fence_set:
        fence.set()
    code, reason = _watch(DeadQuery(error), StopRequest(), SimpleNamespace(exit=None), fence=fence)
    assert code is expected
    assert (reason == LEASE_LOST_REASON) is (expected is ExitCode.LEASE_LOST)


def test_without_a_lease_the_fence_text_is_just_a_failure():
    code, _ = _watch(DeadQuery(FENCED), StopRequest(), SimpleNamespace(exit=None), fence=None)
    assert code is not ExitCode.LEASE_LOST
