"""The Flink SQL peer's pure parts: the SQL it writes, its configuration, its pins."""

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bench import flink_peer

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]


def test_the_sink_writes_id_first_and_sentNs_last():
    create_sink = flink_peer.job_statements("b:1", "in", "out")[1]
    columns = re.findall(r"^  `(\w+)` ", create_sink, re.M)
    assert columns[0] == "id" and columns[-1] == "sentNs" and "inTs" in columns
    assert re.search(r"`sentNs` BIGINT", create_sink) and "'format' = 'json'" in create_sink


def test_the_query_is_the_spark_paths_filter():
    insert = flink_peer.job_statements("b:1", "in", "out")[-1]
    assert insert.startswith("INSERT INTO fraud_out") and "WHERE `amount` > 1000" in insert


def test_topics_and_servers_are_quoted_sql_strings():
    source, sink, _ = flink_peer.job_statements("h:9092", "it's", "o'ut")
    assert "'topic' = 'it''s'" in source and "'topic' = 'o''ut'" in sink
    assert "'properties.bootstrap.servers' = 'h:9092'" in source


def test_low_latency_sink_and_tolerant_source():
    source, sink, _ = flink_peer.job_statements("b:1", "in", "out")
    assert "'properties.linger.ms' = '0'" in sink and "'sink.delivery-guarantee' = 'at-least-once'" in sink
    assert "'json.ignore-parse-errors' = 'true'" in source and "'scan.startup.mode' = 'earliest-offset'" in source


def test_config_parallelism_jars_and_checkpoints(tmp_path):
    jar = tmp_path / "flink-sql-connector-kafka-5.0.0-2.2.jar"
    conf = flink_peer.job_config(3, [jar])
    assert conf["parallelism.default"] == "3"
    assert conf["pipeline.jars"] == jar.resolve().as_uri()
    assert "execution.checkpointing.interval" not in conf
    assert flink_peer.job_config(3, [jar], checkpoint_interval_ms=1000)["execution.checkpointing.interval"] == "1000 ms"


def test_a_checkpointed_peer_stores_its_checkpoints_in_files_beside_its_work(tmp_path):
    """Like a Spark checkpoint, not in the JobManager's memory (Flink's default storage)."""
    conf = flink_peer.job_config(2, [], checkpoint_interval_ms=1000, tmp_dir=tmp_path / "tmp")
    assert conf["execution.checkpointing.mode"] == "AT_LEAST_ONCE"
    assert conf["execution.checkpointing.storage"] == "filesystem"
    assert conf["execution.checkpointing.dir"] == (tmp_path / "checkpoints").as_uri()


def test_bench_latency_runs_the_peer_both_ways():
    from bench.latency import FLINK_CHECKPOINT_MS, PATHS, TRIGGERS

    assert PATHS["flink"] == PATHS["flinkCheckpointed"] == "flink"
    assert "flink" not in FLINK_CHECKPOINT_MS  # the peer as the issue measured it: no checkpoints
    epoch_ms = int(TRIGGERS["continuous"]["continuous"]["checkpointInterval"].removesuffix("s")) * 1000
    assert FLINK_CHECKPOINT_MS["flinkCheckpointed"] == epoch_ms


def test_not_installed_names_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMQ_CACHE", str(tmp_path))
    with pytest.raises(flink_peer.FlinkNotInstalled, match="hack/install-flink.sh"):
        flink_peer.flink_python()
    with pytest.raises(flink_peer.FlinkNotInstalled, match="hack/install-flink.sh"):
        flink_peer.connector_jars()


def test_pyflink_matches_the_connectors_flink_minor():
    reqs = (ROOT / "bench/flink/requirements.txt").read_text()
    pyflink = re.search(r"^apache-flink==(\d+\.\d+)\.\d+$", reqs, re.M).group(1)
    assert re.search(r"^apache-flink-libraries==" + re.escape(pyflink) + r"\.", reqs, re.M)
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    props = ET.parse(ROOT / "bench/flink/pom.xml").getroot().find("m:properties", ns)
    connector = props.find("m:flink.kafka.connector.version", ns).text
    assert connector.endswith("-" + pyflink), (connector, pyflink)


def test_completed_checkpoints_are_read_from_the_jobmanagers_log(tmp_path):
    peer = flink_peer.FlinkPeer("b:1", "in", "out", 2, tmp_path, checkpoint_interval_ms=1000)
    assert peer.completed_checkpoints() == 0
    (tmp_path / "flink-root-python-host.log").write_text(
        "INFO CheckpointCoordinator - Completed checkpoint 9 for job 3f2a (1234 bytes, checkpointDuration=12 ms).\n"
        "INFO CheckpointCoordinator - Completed checkpoint 10 for job 3f2a (1234 bytes, checkpointDuration=9 ms).\n"
    )
    assert peer.completed_checkpoints() == 10
