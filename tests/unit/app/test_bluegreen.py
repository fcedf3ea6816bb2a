"""Where a blue/green upgrade's green driver starts (app.driver.bluegreen, app.driver.starting_offsets): at exactly the
offsets blue committed last, not at the in-flight ones, and not at latest or earliest."""

from __future__ import annotations

import pytest

from app.driver.bluegreen import as_green, blue_committed
from app.driver.starting_offsets import plan_start
from contract.checkpoint import CheckpointState
from tests.unit.app.test_checkpoint import _write_checkpoint

pytestmark = pytest.mark.unit


def test_green_starts_its_fresh_checkpoint_at_blues_last_commit(tmp_path):
    blue = tmp_path / "blue"
    _write_checkpoint(blue, committed=4, planned=5, offsets_by_batch=lambda b: [{"payments": {"0": b * 10, "1": b}}])
    resume = blue_committed(str(blue))
    assert resume is not None and resume.batch_id == 4 and resume.checkpoint == str(blue)
    fresh = CheckpointState(location=str(tmp_path / "green"), exists=False)
    plan = plan_start(fresh, resume, {"payments": 3})  # a partition added since starts at its earliest
    assert plan.starting_offsets == '{"payments":{"0":40,"1":4,"2":-2}}'
    assert plan.recovered.batch_id == 4
    green = as_green(plan, resume)  # not a lost checkpoint: no CheckpointLost warning
    assert green.recovered is None and green.starting_offsets == plan.starting_offsets
    assert green.note.startswith("blue/green: a fresh checkpoint from the offsets blue committed last (batch 4 of ")


def test_no_commit_in_blue_leaves_the_choice_to_the_caller(tmp_path):
    assert blue_committed(str(tmp_path / "nothing")) is None
