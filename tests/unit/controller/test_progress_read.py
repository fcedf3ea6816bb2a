"""When the operator reads each query's progress (controller.progress_read.next_read)."""

import pytest

from controller.progress_read import next_read

pytestmark = pytest.mark.unit


def test_a_query_is_read_once_per_interval_on_its_own_phase():
    reads = [next_read(0.0, 15.0, "ns/q")]
    for _ in range(5):
        reads.append(next_read(reads[-1], 15.0, "ns/q"))
    assert all(b - a == pytest.approx(15.0) for a, b in zip(reads, reads[1:], strict=False))
    # late or early, the next read lands on the same phase: the schedule does not drift with the passes
    assert next_read(reads[2] + 3.7, 15.0, "ns/q") == pytest.approx(reads[3])
    assert 0 < next_read(100.0, 15.0, "ns/q") - 100.0 <= 15.0


def test_two_thousand_queries_started_together_spread_over_the_interval():
    due = [next_read(1000.0, 15.0, f"tenant-{i % 40}/q{i}") - 1000.0 for i in range(2000)]
    per_second = [sum(1 for d in due if s < d <= s + 1) for s in range(15)]
    assert min(per_second) > 2000 / 15 * 0.7 and max(per_second) < 2000 / 15 * 1.3, per_second
