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
        "spark.driver.extraJavaOptions="
    )  # the JIT A/B's default side, as its table shows it


def _page_with_results(tmp_path, monkeypatch, blocks: str):
    """A page under a fake repository root with two runs of one kind, rendered as their ``value``."""
    from bench import report

    results = tmp_path / "bench" / "results"
    results.mkdir(parents=True)
    for stamp, value in (("20261123T120755Z", "before the warm-up"), ("20261123T151519Z", "after the warm-up")):
        (results / f"recovery-continuous-standby-release-{stamp}.json").write_text(f'{{"bench": "fake", "value": "{value}"}}')
    monkeypatch.setattr(report, "ROOT", tmp_path)
    monkeypatch.setitem(report.RENDER, "fake", lambda r: r["value"])
    page = tmp_path / "benchmarks.md"
    page.write_text(blocks)
    return report, page


def test_latest_keeps_a_block_that_names_its_file_on_that_file(tmp_path, monkeypatch):
    old = "bench/results/recovery-continuous-standby-release-20261123T120755Z.json"
    report, page = _page_with_results(
        tmp_path, monkeypatch, f"The run before the warm-up:\n\n<!-- bench.report {old} -->\nstale\n<!-- /bench.report -->\n"
    )
    assert report.write_page(page, latest=True) == [old]
    assert (
        page.read_text()
        == f"The run before the warm-up:\n\n<!-- bench.report {old} -->\nbefore the warm-up\n\n<!-- /bench.report -->\n"
    )


def test_latest_moves_only_blocks_marked_latest_and_fills_a_block_that_names_a_kind(tmp_path, monkeypatch):
    old = "bench/results/recovery-continuous-standby-release-20261123T120755Z.json"
    new = "bench/results/recovery-continuous-standby-release-20261123T151519Z.json"
    report, page = _page_with_results(tmp_path, monkeypatch, (
        f"<!-- bench.report latest {old} -->\n<!-- /bench.report -->\n"
        f"<!-- bench.report {old} -->\n<!-- /bench.report -->\n"
        "<!-- bench.report recovery-continuous-standby-release -->\n<!-- /bench.report -->\n"))  # fmt: skip
    assert report.write_page(page) == [old, old, new]  # without --latest nothing moves
    assert report.write_page(page, latest=True) == [new, old, new]
    assert page.read_text() == (f"<!-- bench.report latest {new} -->\nafter the warm-up\n\n<!-- /bench.report -->\n"
                                f"<!-- bench.report {old} -->\nbefore the warm-up\n\n<!-- /bench.report -->\n"
                                f"<!-- bench.report {new} -->\nafter the warm-up\n\n<!-- /bench.report -->\n")  # fmt: skip


def test_repoint_moves_a_block_that_names_its_file_on_purpose(tmp_path, monkeypatch):
    old = "bench/results/recovery-continuous-standby-release-20261123T120755Z.json"
    new = "bench/results/recovery-continuous-standby-release-20261123T151519Z.json"
    report, page = _page_with_results(tmp_path, monkeypatch, f"<!-- bench.report {old} -->\n<!-- /bench.report -->\n")
    assert report.write_page(page, latest=True) == [old]
    assert report.write_page(page, repoint=[old]) == [new]
    assert page.read_text() == f"<!-- bench.report {new} -->\nafter the warm-up\n\n<!-- /bench.report -->\n"


def test_the_chaos_table_shows_no_digit_the_results_file_lacks():
    import json

    from bench.common import ROOT
    from bench.report import chaos

    run = json.loads((ROOT / "bench/results/chaos-20261125T043505Z.json").read_text())
    rows = [line.split("|")[1:-1] for line in chaos(run).splitlines()[2:] if line.startswith("|")]
    by_fault = {int(r[0]): [c.strip() for c in r] for r in rows}
    # atS 171.6 -> 2.86 min, rounded to 2.9 (not "2.90"); 0.7 s recorded, shown 0.7 (not "0.70")
    assert by_fault[1][1] == "2.9" and by_fault[2][3] == "0.7" and by_fault[4][1] == "12.0"
