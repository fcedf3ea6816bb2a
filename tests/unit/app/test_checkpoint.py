import json
import os

import pytest

from app.checkpoint import read_checkpoint

pytestmark = pytest.mark.unit


def _write_checkpoint(root, committed: int, planned: int, offsets_by_batch):
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "metadata").write_text(json.dumps({"id": "q-1"}))
    for batch in range(planned + 1):
        sources = "\n".join(json.dumps(o) for o in offsets_by_batch(batch))
        (root / "offsets" / str(batch)).write_text(f"v1\n{{}}\n{sources}\n")
        (root / "offsets" / f".{batch}.crc").write_text("crc")
    for batch in range(committed + 1):
        (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    # A writer that died mid-write leaves a hidden temp file; it must be ignored.
    (root / "commits" / f".{committed + 1}.3f2a.tmp").write_text("v1\n")


def test_last_committed_epoch_and_its_offsets(tmp_path):
    _write_checkpoint(tmp_path, committed=4, planned=5, offsets_by_batch=lambda b: [{"payments": {"0": b * 10, "1": b}}])
    state = read_checkpoint(tmp_path)
    assert state.exists and state.query_id == "q-1"
    assert state.last_committed == 4
    assert state.in_flight == 5
    assert state.kafka_offsets() == {"payments": {0: 40, 1: 4}}
    assert state.committed_at == pytest.approx(os.path.getmtime(tmp_path / "commits" / "4"))


def test_epochs_sort_numerically_not_as_text(tmp_path):
    _write_checkpoint(tmp_path, committed=11, planned=11, offsets_by_batch=lambda b: [{"t": {"0": b}}])
    state = read_checkpoint(tmp_path)
    assert state.last_committed == 11 and state.in_flight is None
    assert state.kafka_offsets() == {"t": {0: 11}}


def test_rate_source_offsets_are_not_taken_for_kafka(tmp_path):
    _write_checkpoint(tmp_path, committed=0, planned=0, offsets_by_batch=lambda b: [{"0": {"value": 17, "runTimeMs": 1}}])
    state = read_checkpoint(tmp_path)
    assert state.committed_offsets == [{"0": {"value": 17, "runTimeMs": 1}}]
    assert state.kafka_offsets() == {}


def test_missing_and_empty_checkpoints(tmp_path):
    assert read_checkpoint(tmp_path / "nope").exists is False
    (tmp_path / "fresh").mkdir()
    state = read_checkpoint(tmp_path / "fresh")
    assert state.exists and state.last_committed is None and state.kafka_offsets() == {}


def test_truncated_offsets_file_is_tolerated(tmp_path):
    _write_checkpoint(tmp_path, committed=1, planned=1, offsets_by_batch=lambda b: [{"t": {"0": b}}])
    (tmp_path / "offsets" / "1").write_text("")
    state = read_checkpoint(tmp_path)
    assert state.last_committed == 1 and state.committed_offsets == []
