"""app.driver.resize on real Spark: a running query's executors follow the file the kubelet writes from
the driver pod's annotation (autoscaling.recommendOnly false, issue #40). Spark's local-cluster master
stands in for Kubernetes' scheduler backend: both take SparkContext.requestTotalExecutors and
killExecutors (the e2e scenario, tests/e2e/test_autoscaling.py, runs it on Kubernetes)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


def test_a_running_querys_executors_follow_the_file_down_and_up_and_nothing_beyond_the_spec(tmp_path):
    done = subprocess.run([sys.executable, "-m", "testbed.resize_probe", str(tmp_path)], capture_output=True, text=True,
                          timeout=420)  # fmt: skip
    log = done.stderr[-4000:]
    assert done.returncode == 0, log
    steps = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [(s["wrote"], s["registered"]) for s in steps] == [("1", 1), ("3", 1), ("2", 2)], log
    assert all(s["reached"] and s["active"] and s["exception"] is None and s["batches"] >= 3 for s in steps), steps
    assert "resizing in place: 2 -> 1 executors" in done.stderr
    assert "executors 1 removed (idle; 1 asked for)" in done.stderr  # the newest went
    assert "holds '3', not a number of executors within 1..2" in done.stderr
    assert "resizing in place: 1 -> 2 executors" in done.stderr
