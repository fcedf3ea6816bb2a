"""bench.settle: the JVM's cores per window come from consecutive samples of its threads' CPU seconds."""

import pytest

from bench.latency import jvm_cores_between

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


def test_the_report_puts_each_windows_paths_side_by_side():
    from bench.report import settle

    def window(lo, hi, p50, p99, jit, lost=0):
        return {
            "fromS": lo,
            "toS": hi,
            "expected": 100,
            "received": 100 - lost,
            "latencyMs": {"p50": p50, "p99": p99},
            "jvmCores": {"jit": jit, "gc": 0.0, "other": 0.5},
        }

    machine = {"cores": 2, "cpuModel": "x", "memoryGiB": 23.5, "java": "17", "loadAverageAtStart": [0, 0, 0]}
    results = {
        "machine": machine,
        "commit": "abc",
        "started": "s",
        "finished": "f",
        "load": {},
        "settings": {"ramp": 15.0, "rate": 10_000, "minutes": 1.0, "every": 30.0},
        "runs": [
            {"path": "continuous", "windows": [window(0, 30, 30.0, 200.0, 0.3), window(30, 60, 20.0, 90.0, 0.05)]},
            {"path": "realTime", "windows": [window(0, 30, 15.0, 480.0, 0.3, lost=2), window(30, 60, 9.0, 300.0, 0.04)]},
        ],
    }
    text = settle(results)
    lines = text.splitlines()
    assert "continuous p50 / p99 ms" in lines[0] and "realTime JIT cores" in lines[0]
    assert "30.0 / 200" in lines[2] and "15.0 / 480" in lines[2] and "20.0 / 90.0" in lines[3]
    assert "lost: continuous 0, realTime 2" in text
