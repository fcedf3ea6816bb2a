"""bench.settle: the JVM's cores per window come from consecutive samples of its threads' CPU seconds."""

import pytest

from bench.settle import jvm_cores_between

pytestmark = pytest.mark.unit


def test_cores_per_window_are_cpu_seconds_over_wall_seconds_between_samples():
    samples = [
        (100.0, {"jit": 0.0, "gc": 0.0, "other": 0.0}),
        (120.0, {"jit": 10.0, "gc": 1.0, "other": 8.0}),  # 20 s: half a core compiling
        (140.0, {"jit": 10.4, "gc": 1.2, "other": 16.0}),  # the next 20 s: the JIT nearly done
    ]
    assert jvm_cores_between(samples) == [{"jit": 0.5, "gc": 0.05, "other": 0.4}, {"jit": 0.02, "gc": 0.01, "other": 0.4}]


def test_one_sample_makes_no_window():
    assert jvm_cores_between([(1.0, {"jit": 1.0})]) == []
