import pytest

from app.pipeline import session
from app.contract.load import validate_spec
from tests.support.specs import query_spec, with_change

pytestmark = pytest.mark.unit


def test_slots_and_user_conf(monkeypatch, tmp_path):
    (tmp_path / "spark-sql-kafka.jar").write_text("")
    monkeypatch.setenv("STREAMQ_JARS_DIR", str(tmp_path))
    spec = validate_spec(with_change(query_spec(), "runtime", {"parallelism": 6, "sparkConf": {"spark.ui.enabled": "true"}}))
    conf = session.spark_conf(spec)
    assert conf["spark.master"] == "local[6]"
    assert conf["spark.jars"] == str(tmp_path / "spark-sql-kafka.jar")
    assert conf["spark.ui.enabled"] == "true"  # the user's sparkConf wins


def test_user_can_point_at_a_cluster_master():
    spec = validate_spec(with_change(query_spec(), "runtime", {"sparkConf": {"spark.master": "k8s://https://kubernetes.default.svc:443"}}))
    assert session.spark_conf(spec)["spark.master"].startswith("k8s://")


@pytest.mark.parametrize(("location", "local"), [
    ("/checkpoints/q", True), ("file:///checkpoints/q", True), ("s3a://bucket/q", False),
])  # fmt: skip
def test_local_checkpoints_skip_hadoops_forking_file_manager(location, local):
    spec = validate_spec(with_change(query_spec(), "checkpoint", {"location": location}))
    conf = session.spark_conf(spec)
    assert ("spark.sql.streaming.checkpointFileManagerClass" in conf) is local
