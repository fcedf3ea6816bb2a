"""The in-place restart policy: what a driver restarts itself, how soon, and when it gives up."""

from __future__ import annotations

import pytest

from app.driver.restarts import MAX_DELAY_S, InPlaceRestarts
from contract import ExitCode

pytestmark = pytest.mark.unit


def test_transient_failures_restart_in_place_with_a_doubling_delay_up_to_the_limit():
    r = InPlaceRestarts(limit=3)
    delays = [r.after_failure(ExitCode.QUERY_FAILED, f"broken {i}", last_committed=7) for i in range(4)]
    assert delays == [1.0, 2.0, 4.0, None]  # the fourth failure in a row, without a commit: a new pod
    assert (r.total, r.in_a_row, r.last_reason) == (3, 3, "broken 2")


@pytest.mark.parametrize("code", [ExitCode.QUERY_REFUSED, ExitCode.STALLED, ExitCode.PARTITIONS_CHANGED,
                                  ExitCode.INVALID_SPEC, ExitCode.CHECKPOINT_UNWRITABLE, ExitCode.OK])  # fmt: skip
def test_what_a_restart_in_the_same_jvm_cannot_fix_ends_the_driver(code):
    r = InPlaceRestarts(limit=3)
    assert r.after_failure(code, "x", last_committed=1) is None
    assert r.total == 0


def test_a_commit_between_failures_starts_the_count_again():
    r = InPlaceRestarts(limit=2)
    assert r.after_failure(ExitCode.QUERY_FAILED, "a", last_committed=10) == 1.0
    assert r.after_failure(ExitCode.QUERY_FAILED, "b", last_committed=10) == 2.0
    assert r.after_failure(ExitCode.QUERY_FAILED, "c", last_committed=11) == 1.0  # it committed batch 11 meanwhile
    assert (r.total, r.in_a_row) == (3, 1)


def test_limit_zero_always_asks_for_a_new_pod():
    assert InPlaceRestarts(limit=0).after_failure(ExitCode.QUERY_FAILED, "x", last_committed=None) is None


def test_the_delay_is_capped():
    r = InPlaceRestarts(limit=100)
    delays = [r.after_failure(ExitCode.QUERY_FAILED, "x", last_committed=None) for _ in range(10)]
    assert max(delays) == MAX_DELAY_S
