"""The checkpoint inspector on checkpoints REAL Spark wrote, in every trigger mode:
what it reads must be what Spark itself reports (lastProgress) and what the broker holds.

The queries run in-process on the shared SparkSession; `streamq checkpoint inspect`
runs as its own process, as a user would run it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from app.checkpoints.reader import read_checkpoint
from app.pipeline.plan import build_dataframe, build_writer
from contract.load import validate_spec
from testbed.jobs import ROOT
from testbed.specs import flagged, payments, query_spec
from testbed.wait import wait_for

pytestmark = pytest.mark.integration

N = 60


def inspect_cli(location, *args) -> dict:
    out = subprocess.run([sys.executable, "-m", "app", "checkpoint", "inspect", str(location), "--json", *args],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _kafka_end_offsets(progress: dict) -> dict[str, dict[int, int]]:
    end = progress["sources"][0]["endOffset"]
    end = json.loads(end) if isinstance(end, str) else end
    return {t: {int(p): o for p, o in parts.items()} for t, parts in end.items()}


@pytest.mark.parametrize(
    "trigger",
    [
        {"microBatch": {"interval": "0s"}},
        {"realTime": {"batchDuration": "5s"}},
        {"availableNow": {}},
    ],
    ids=lambda t: next(iter(t)),
)
def test_inspector_reads_what_spark_reports_in_batch_modes(spark, kafka_broker, kafka_topic, tmp_path, trigger):
    source, sink = kafka_topic(partitions=2), kafka_topic()
    records = payments(N)
    kafka_broker.produce(source, records)
    extra = {"outputMode": "update"} if "realTime" in trigger else {}
    spec = validate_spec(
        query_spec(
            bootstrap=kafka_broker.bootstrap, topic=source, sink_topic=sink, location=tmp_path / "ck", trigger=trigger, **extra
        )
    )
    query = build_writer(build_dataframe(spark, spec), f"q-{sink}", spec).start()
    try:
        kafka_broker.consume_all(sink, timeout=120, expected_count=len(flagged(records)), decode=True)
        if "availableNow" not in trigger:  # a second round: the last batch is not the first one
            more = payments(N, start=N)
            kafka_broker.produce(source, more)
            records += more
            kafka_broker.consume_all(sink, timeout=120, expected_count=len(flagged(records)), decode=True)
        end = kafka_broker.end_offsets(source)
        # the batch that read the last record is committed (a progress event follows its commit)
        wait_for(lambda: query.lastProgress and _kafka_end_offsets(query.lastProgress).get(source) == end, 120,
                 "a progress event for the batch that read everything")  # fmt: skip
    finally:
        query.stop()
    spark_says = query.lastProgress
    state = read_checkpoint(tmp_path / "ck")
    print(
        f"{next(iter(trigger))}: Spark's last batch {spark_says['batchId']} endOffset "
        f"{spark_says['sources'][0]['endOffset']}; inspector: batch {state.last_committed} {state.kafka_offsets()}"
    )
    assert state.exists and state.resumable and not state.problems
    assert state.last_committed == spark_says["batchId"]
    assert state.kafka_offsets() == _kafka_end_offsets(spark_says) == {source: end}
    assert sum(end.values()) == len(records)
    assert state.query_id == str(query.id)

    report = inspect_cli(tmp_path / "ck")  # the CLI, as its own process
    assert report["lastCommitted"] == spark_says["batchId"] and report["queryId"] == str(query.id)
    assert report["committedOffsets"] == [{source: {str(p): o for p, o in end.items()}}]
    assert report["inFlight"] is None and 0 <= report["lastCommitAgeSeconds"] < 600
    assert report["sourceKinds"] == ["kafka"] and report["statefulOperators"] == []


def test_inspector_reads_what_a_continuous_query_committed(spark, kafka_broker, kafka_topic, tmp_path):
    """Continuous mode reports no progress: the committed epochs are compared with what the
    broker holds and with the records the query consumed and wrote."""
    source, sink = kafka_topic(partitions=2), kafka_topic()
    records = payments(N)
    kafka_broker.produce(source, records)
    spec = validate_spec(query_spec(bootstrap=kafka_broker.bootstrap, topic=source, sink_topic=sink, location=tmp_path / "ck",
                                    trigger={"continuous": {"checkpointInterval": "500ms"}}))  # fmt: skip
    query = build_writer(build_dataframe(spark, spec), f"q-{sink}", spec).start()
    end = kafka_broker.end_offsets(source)
    try:
        out = kafka_broker.consume_all(sink, timeout=120, expected_count=len(flagged(records)), decode=True)
        # epochs keep being committed; wait until one covers every record consumed
        state = wait_for(lambda: (s := read_checkpoint(tmp_path / "ck")).kafka_offsets() == {source: end} and s, 120,
                         "an epoch that covers all input")  # fmt: skip
        assert query.lastProgress is None  # continuous mode: Spark itself says nothing
    finally:
        query.stop()
    print(
        f"continuous: epoch {state.last_committed} committed {state.kafka_offsets()}; broker end {end}; "
        f"{len(out)} flagged of {N} consumed"
    )
    assert sorted(out) == sorted(flagged(records))
    assert sum(state.kafka_offsets()[source].values()) == N  # every consumed record is behind the committed offsets
    assert state.source_kinds() == ["kafka"] and state.committed_at is not None
    report = inspect_cli(tmp_path / "ck", "--bootstrap-servers", kafka_broker.bootstrap)
    assert report["lastCommitted"] >= state.last_committed
    assert report["lag"]["total"] == 0 and report["lag"]["perPartition"] == {source: {"0": 0, "1": 0}}

    kafka_broker.produce(source, payments(7, start=N))  # more input, nobody reads it
    report = inspect_cli(tmp_path / "ck", "--bootstrap-servers", kafka_broker.bootstrap)
    assert report["lag"]["total"] == 7
