"""The job's own checkpoint gate (app.driver.run._checkpoint_gate) on checkpoints written by hand:
a run outside the operator is protected too."""

import json

import pytest

from app.driver.run import _checkpoint_gate
from contract.load import validate_spec
from testbed.specs import query_spec, with_change

pytestmark = pytest.mark.unit


def _checkpoint(root, topic="payments"):
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "metadata").write_text('{"id":"q"}')
    (root / "offsets" / "0").write_text("v1\n{}\n" + json.dumps({topic: {"0": 5}}) + "\n")
    (root / "commits" / "0").write_text("v1\n{}\n")


def spec(location, **changes):
    base = with_change(query_spec(), "checkpoint", {"location": str(location)})
    for path, value in changes.items():
        base = with_change(base, path, value)
    return validate_spec(base)


def test_a_checkpoint_of_the_same_topics_is_used(tmp_path):
    _checkpoint(tmp_path / "ck")
    same, state, refused = _checkpoint_gate(spec(tmp_path / "ck"))
    assert refused is None and same.checkpoint.location == str(tmp_path / "ck") and state.last_committed == 0


def test_other_topics_are_refused_naming_the_field(tmp_path):
    _checkpoint(tmp_path / "ck", topic="orders")
    _, _, refused = _checkpoint_gate(spec(tmp_path / "ck"))
    assert refused.startswith(
        "spec.source.kafka.topics: the checkpoint holds offsets of topics ['orders'], the spec reads ['payments']"
    )


def test_new_checkpoint_policy_moves_to_a_fresh_location_once(tmp_path):
    _checkpoint(tmp_path / "ck", topic="orders")
    s = spec(tmp_path / "ck", **{"checkpoint.onIncompatibleChange": "newCheckpoint"})
    fresh, state, refused = _checkpoint_gate(s)
    assert refused is None and fresh.checkpoint.location == f"{tmp_path / 'ck'}-reset-1" and not state.exists
    _checkpoint(tmp_path / "ck-reset-1")  # the fresh one was written by the run
    again, state, _ = _checkpoint_gate(s)
    assert again.checkpoint.location == f"{tmp_path / 'ck'}-reset-1" and state.exists


def test_no_checkpoint_is_nothing_to_check(tmp_path):
    _, state, refused = _checkpoint_gate(spec(tmp_path / "none"))
    assert refused is None and not state.exists
