"""bench.common's choice of results files (what bench.report and bench.plots draw from)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.unit


def test_latest_results_keeps_families_apart(tmp_path):
    from bench.common import latest_results

    for name in ("recovery-continuous-20261122T012916Z.json", "recovery-continuous-standby-release-20261123T151519Z.json",
                 "recovery-continuous-in-place-20261123T152420Z.json"):  # fmt: skip
        (tmp_path / name).write_text("{}")
    assert latest_results("recovery-continuous", tmp_path).name == "recovery-continuous-20261122T012916Z.json"
    assert latest_results("recovery-continuous-standby-release", tmp_path).name.endswith("151519Z.json")
    assert latest_results("recovery-microBatch", tmp_path) is None


def test_an_ab_row_names_the_confs_and_kafka_options_tried_without_the_jobs_own_log4j_flag():
    from bench.report import setting_tried

    assert setting_tried({"conf": [], "source_option": [], "sink_option": []}) == "(defaults)"
    assert setting_tried({"conf": [["spark.driver.extraJavaOptions", "-Dlog4j2.configurationFile=x -XX:+UseSerialGC"]],
                          "source_option": [["kafka.fetch.max.wait.ms", "10"]], "sink_option": [["kafka.acks", "0"]]}) == (
        "spark.driver.extraJavaOptions=-XX:+UseSerialGC, source kafka.fetch.max.wait.ms=10, sink kafka.acks=0")  # fmt: skip
    assert setting_tried({"conf": [["spark.driver.extraJavaOptions", "-Dlog4j2.configurationFile=x"]]}) == (
        "spark.driver.extraJavaOptions=")  # the JIT A/B's default side, as its table shows it
