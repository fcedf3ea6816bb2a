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
