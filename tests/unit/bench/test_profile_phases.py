"""bench.profile_continuous: runnable threads by phase of the second (who holds or wants the CPUs right
after a continuous epoch boundary)."""

from __future__ import annotations

import collections

import pytest

from bench.profile_continuous import PHASES, runnable_by_phase

pytestmark = pytest.mark.unit


def test_threads_runnable_after_the_boundary_come_first_by_their_excess_over_the_rest_of_the_second():
    samples = collections.Counter({p: 10 for p in range(PHASES)})
    by_phase = collections.Counter()
    by_phase.update({(1, p): 10 for p in range(PHASES)})  # always runnable: no excess
    by_phase.update({(2, 0): 8, (2, 1): 4})  # only after the boundary
    by_phase.update({(3, 0): 5, (4, 1): 5})  # two of one kind: folded into one row
    out = runnable_by_phase(by_phase, samples, names={2: "dispatcher-event-loop-3"},
                            comms={1: "java", 3: "Executor task launch worker-1", 4: "Executor task launch worker-7"})  # fmt: skip
    assert out["all"][0] == pytest.approx(1 + 0.8 + 0.5) and out["all"][5] == pytest.approx(1.0)
    assert [r["thread"] for r in out["threads"]] == [
        "dispatcher-event-loop-N", "Executor task launch worker-N", "java"
    ]  # fmt: skip
    first = out["threads"][0]
    assert first["byPhase"][:3] == [0.8, 0.4, 0.0] and first["first200msExcess"] == pytest.approx(0.6)
    assert out["threads"][2]["first200msExcess"] == pytest.approx(0.0)


def test_a_phase_with_no_sample_reads_zero_not_a_division_by_zero():
    out = runnable_by_phase(collections.Counter({(1, 0): 3}), collections.Counter({0: 3}), {}, {1: "x"})
    assert out["all"] == [1.0] + [0.0] * (PHASES - 1)
