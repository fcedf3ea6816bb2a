"""bench.recovery's largest gap: the longest stretch without an output record around a stop."""

from __future__ import annotations

import numpy as np
import pytest

from bench.recovery import largest_gap

pytestmark = pytest.mark.unit


def test_the_largest_gap_is_between_records_around_the_stop():
    s = 1_000_000_000
    recv = [95 * s, 99 * s, 100 * s, 103 * s, 103.5 * s, 104 * s]  # a 3 s hole after the stop at 100 s
    data = np.array([[i, 0, r, 0] for i, r in enumerate(recv)], dtype=np.int64)
    row = {"tKillNs": 100 * s, "killToFirstOutputS": 3.0}
    assert largest_gap(data, row, margin_s=5.0) == 4.0  # 95 -> 99 s is inside the window and longer
    assert largest_gap(data, row, margin_s=1.0) == 3.0  # from 99 s: the hole after the stop
    assert largest_gap(data, {"tKillNs": 0, "killToFirstOutputS": None}) is None
