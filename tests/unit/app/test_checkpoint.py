import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from app.checkpoints.reader import CheckpointError, local_path, read_checkpoint, unwritable

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
    assert state.exists and state.query_id == "q-1" and state.resumable and not state.problems
    assert state.last_committed == 4
    assert state.in_flight == 5
    assert state.kafka_offsets() == {"payments": {0: 40, 1: 4}}
    assert state.in_flight_kafka_offsets() == {"payments": {0: 50, 1: 5}}
    assert state.committed_at == pytest.approx(os.path.getmtime(tmp_path / "commits" / "4"))
    assert state.planned_at == pytest.approx(os.path.getmtime(tmp_path / "offsets" / "5"))
    assert state.sources == 1 and state.source_kinds() == ["kafka"]


def test_ages_are_reported_against_a_given_clock(tmp_path):
    _write_checkpoint(tmp_path, committed=1, planned=2, offsets_by_batch=lambda b: [{"t": {"0": b}}])
    os.utime(tmp_path / "commits" / "1", (1000, 1000))
    os.utime(tmp_path / "offsets" / "2", (1030, 1030))
    report = read_checkpoint(tmp_path).to_json(now=1050)
    assert report["lastCommitAgeSeconds"] == 50 and report["inFlightAgeSeconds"] == 20
    assert report["lastCommitted"] == 1 and report["inFlight"] == 2 and report["committedOffsets"] == [{"t": {"0": 1}}]


def test_epochs_sort_numerically_not_as_text(tmp_path):
    _write_checkpoint(tmp_path, committed=11, planned=11, offsets_by_batch=lambda b: [{"t": {"0": b}}])
    state = read_checkpoint(tmp_path)
    assert state.last_committed == 11 and state.in_flight is None
    assert state.kafka_offsets() == {"t": {0: 11}}


def test_rate_source_offsets_are_not_taken_for_kafka(tmp_path):
    _write_checkpoint(tmp_path, committed=0, planned=0, offsets_by_batch=lambda b: [{"0": {"value": 17, "runTimeMs": 1}}])
    state = read_checkpoint(tmp_path)
    assert state.committed_offsets == [{"0": {"value": 17, "runTimeMs": 1}}]
    assert state.kafka_offsets() == {} and state.source_kinds() == ["other"]


def test_several_sources_are_counted(tmp_path):
    _write_checkpoint(tmp_path, committed=0, planned=0, offsets_by_batch=lambda b: [{"a": {"0": 1}}, 42])
    state = read_checkpoint(tmp_path)
    assert state.sources == 2 and state.source_kinds() == ["kafka", "other"] and state.kafka_offsets() == {"a": {0: 1}}


def test_missing_and_empty_checkpoints(tmp_path):
    missing = read_checkpoint(tmp_path / "nope")
    assert missing.exists is False and not missing.resumable and not missing.has_commits
    (tmp_path / "fresh").mkdir()
    state = read_checkpoint(tmp_path / "fresh")
    assert state.exists and state.last_committed is None and state.kafka_offsets() == {} and state.resumable


def test_truncated_offsets_of_the_newest_commit_fall_back_to_the_previous_batch(tmp_path):
    _write_checkpoint(tmp_path, committed=1, planned=1, offsets_by_batch=lambda b: [{"t": {"0": b}}])
    (tmp_path / "offsets" / "1").write_text("")
    state = read_checkpoint(tmp_path)
    assert state.last_committed == 0 and state.kafka_offsets() == {"t": {0: 0}}
    assert state.problems == ("the newest commit's offsets (offsets/1) are missing or malformed",)
    assert not state.resumable  # Spark would fail to resume from it


def test_an_empty_commit_marker_is_not_a_commit(tmp_path):
    _write_checkpoint(tmp_path, committed=2, planned=2, offsets_by_batch=lambda b: [{"t": {"0": b}}])
    (tmp_path / "commits" / "2").write_text("")
    state = read_checkpoint(tmp_path)
    assert state.last_committed == 1 and "commits/2" in state.problems[0] and not state.resumable


def test_in_flight_offsets_being_written_are_tolerated(tmp_path):
    _write_checkpoint(tmp_path, committed=3, planned=3, offsets_by_batch=lambda b: [{"t": {"0": b}}])
    (tmp_path / "offsets" / "4").write_text("v1\n")  # cut short, or being written
    (tmp_path / "offsets" / ".4.tmp").write_text('v1\n{}\n{"t"')  # the writer's temp file
    state = read_checkpoint(tmp_path)
    assert state.last_committed == 3 and state.in_flight == 4 and state.in_flight_offsets == []
    assert state.resumable  # Spark plans batch 4 again
    assert state.problems == ("in-flight offsets/4 are incomplete",)


def test_unreadable_metadata_makes_it_unresumable(tmp_path):
    _write_checkpoint(tmp_path, committed=0, planned=0, offsets_by_batch=lambda b: [{"t": {"0": b}}])
    (tmp_path / "metadata").write_text('{"id": "q-')
    state = read_checkpoint(tmp_path)
    assert state.query_id is None and not state.resumable and "metadata" in state.problems[0]


def test_stateful_operators_are_named_from_their_metadata(tmp_path):
    _write_checkpoint(tmp_path, committed=0, planned=0, offsets_by_batch=lambda b: [5])
    meta = tmp_path / "state" / "0" / "_metadata"
    meta.mkdir(parents=True)
    (meta / "metadata").write_text(
        'v1\n{"operatorInfo":{"operatorId":0,"operatorName":"stateStoreSave"},'
        '"stateStoreInfo":[{"storeName":"default","numColsPrefixKey":0,"numPartitions":4}]}'
    )
    (tmp_path / "state" / "1" / "0").mkdir(parents=True)  # an operator from before metadata was written
    ops = read_checkpoint(tmp_path).stateful_operators
    assert [(o.id, o.name, o.partitions) for o in ops] == [(0, "stateStoreSave", 4), (1, None, None)]


def test_object_stores_through_fsspec():
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    fs.pipe("/ck/q/metadata", b'{"id":"m-1"}')
    fs.pipe("/ck/q/offsets/0", b'v1\n{}\n{"t":{"0":3,"1":4}}')
    fs.pipe("/ck/q/offsets/1", b'v1\n{}\n{"t":{"0":5,"1":6}}')
    fs.pipe("/ck/q/commits/0", b'v1\n{"nextBatchWatermarkMs":0}')
    state = read_checkpoint("memory://ck/q")
    assert state.exists and state.query_id == "m-1" and state.last_committed == 0 and state.in_flight == 1
    assert state.kafka_offsets() == {"t": {0: 3, 1: 4}} and state.committed_at is not None
    assert read_checkpoint("memory://ck/none").exists is False


def test_without_fsspec_an_object_store_is_a_clear_error_and_local_paths_still_work(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "fsspec", None)  # import fsspec -> ImportError
    with pytest.raises(CheckpointError, match=r"gs:// checkpoints needs fsspec"):
        read_checkpoint("gs://bucket/checkpoints/q")
    _write_checkpoint(tmp_path, committed=0, planned=0, offsets_by_batch=lambda b: [{"t": {"0": 1}}])
    assert read_checkpoint(f"file://{tmp_path}").last_committed == 0


def test_local_path():
    assert local_path("/a/b") == "/a/b" and local_path("file:///a/b") == "/a/b" and local_path("ck") == "ck"
    assert local_path("s3a://bucket/a") is None and local_path("hdfs://nn/a") is None


def _unwritable_as(uid: int, location: str) -> str:
    """unwritable() in a forked child that became ``uid``: root may write anywhere, the driver (uid 1000) may not."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to the driver's user, answer, leave without running pytest's cleanup
        try:
            os.close(read_end)
            os.setgid(uid)
            os.setuid(uid)
            os.write(write_end, (unwritable(location) or "").encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as answer:
        text = answer.read()
    os.waitpid(pid, 0)
    return text


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to the driver's uid needs root")
def test_a_root_owned_directory_is_unwritable_for_the_driver_and_the_reason_says_why(tmp_path, request):
    # pytest's tmp_path sits under a 0700 directory: the driver's user could not even look in.
    assert "Permission denied" in _unwritable_as(1000, str(tmp_path / "cp"))
    owned_by_root = Path(tempfile.mkdtemp(prefix="streamq-hostpath-"))
    os.chmod(owned_by_root, 0o755)
    request.addfinalizer(lambda: shutil.rmtree(owned_by_root))
    reason = _unwritable_as(1000, str(owned_by_root / "query" / "cp"))
    assert f"directory {owned_by_root} is owned by uid 0 with mode 0755" in reason
    assert "runs as uid 1000" in reason and "hostPath" in reason
    os.chown(owned_by_root, 1000, 1000)
    assert _unwritable_as(1000, str(owned_by_root / "query" / "cp")) == ""


def test_a_file_where_the_checkpoint_directory_should_be_is_unwritable(tmp_path):
    (tmp_path / "cp").write_text("not a directory")
    assert "file (not a directory)" in unwritable(str(tmp_path / "cp"))
    assert unwritable(str(tmp_path / "new" / "cp")) is None
    assert unwritable("s3a://bucket/cp") is None  # Spark reports remote stores itself
