"""A lost checkpoint restarts from the offsets recorded in status, never from latest."""

import pytest

from app.checkpoints.reader import CheckpointState
from app.driver.starting_offsets import complete_offsets, plan_start
from contract.progress import ProgressRecord, Recovered
from contract.resume import ResumeFrom

pytestmark = pytest.mark.unit

RESUME = ResumeFrom('{"t":{"0":40,"1":12}}', batch_id=7, checkpoint="/ck")


def test_a_checkpoint_with_commits_is_resumed_from_and_the_offsets_are_not_used():
    state = CheckpointState("/ck", True, last_committed=9, committed_offsets=[{"t": {"0": 50, "1": 20}}])
    plan = plan_start(state, RESUME, {"t": 2})
    assert plan.starting_offsets is None and plan.recovered is None and "batch 9" in plan.note
    assert plan_start(state, None, {"t": 2}).note is None


@pytest.mark.parametrize(("state", "why"), [
    (CheckpointState("/ck", False), "missing"),
    (CheckpointState("/ck", True), "empty (nothing committed)"),
    (CheckpointState("/ck", True, last_committed=3, problems=("metadata is not readable JSON",)), "unreadable (metadata is not readable JSON)"),
])  # fmt: skip
def test_a_lost_or_unreadable_checkpoint_starts_from_the_recorded_offsets(state, why):
    plan = plan_start(state, RESUME, {"t": 3})
    # every partition named, one added since starts at the earliest: nothing is skipped
    assert plan.starting_offsets == '{"t":{"0":40,"1":12,"2":-2}}'
    assert plan.recovered == Recovered(reason=why, batch_id=7, starting_offsets=plan.starting_offsets)
    assert f"the checkpoint at /ck is {why}: starting a fresh one from the offsets committed at batch 7" in plan.note


def test_without_recorded_offsets_the_spec_decides():
    assert plan_start(CheckpointState("/ck", False), None, {"t": 2}).starting_offsets is None
    assert plan_start(CheckpointState("/ck", False), ResumeFrom("earliest"), {"t": 2}).starting_offsets == "earliest"


def test_complete_offsets():
    assert complete_offsets({"t": {1: 5}}, {"t": 2, "u": 1}) == {"t": {0: -2, 1: 5}, "u": {0: -2}}
    assert complete_offsets({"t": {0: 5}}, {}) == {"t": {0: 5}}


def test_annotation_and_progress_round_trips():
    assert ResumeFrom.from_annotation(RESUME.to_annotation()) == RESUME
    assert ResumeFrom.from_annotation("{bad") is None and ResumeFrom.from_annotation(None) is None
    progress = ProgressRecord.model_validate({"batchId": 7, "committedOffsets": {"t": {"1": 12, "0": 40}}, "checkpoint": "/ck"})
    assert ResumeFrom.from_progress(progress, "/ck") == RESUME
    assert ResumeFrom.from_progress(progress, "/ck-reset-1") is None  # offsets of another checkpoint
    assert ResumeFrom.from_progress(ProgressRecord(checkpoint="/ck", committed_offsets={}), "/ck") is None
    assert ResumeFrom.from_progress(None, "/ck") is None
