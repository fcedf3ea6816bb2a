"""One Spark release on the classpath, or a recorded reason why not."""

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
# pyspark pin -> the connector release used with it, when they differ; the reason
# is in hack/maven/spark-kafka/pom.xml (no 4.3.0 connector on the reachable Maven repository).
CONNECTOR_FOR = {"4.3.0": "4.2.0"}


def _pin(text: str, package: str) -> str:
    match = re.search(rf'^\s*"?{package}==([0-9][^"\s,]*)', text, re.M)
    assert match, f"{package} is not pinned"
    return match.group(1)


def _pom_properties() -> dict[str, str]:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    props = ET.parse(ROOT / "hack/maven/spark-kafka/pom.xml").getroot().find("m:properties", ns)
    return {child.tag.split("}", 1)[1]: child.text for child in props}


def test_pyspark_is_pinned_the_same_everywhere():
    pinned = _pin((ROOT / "pyproject.toml").read_text(), "pyspark")
    assert _pin((ROOT / "docker/constraints.txt").read_text(), "pyspark") == pinned


def test_the_connector_and_its_token_provider_are_one_release():
    props = _pom_properties()
    assert props["spark.kafka.version"] == props["spark.token.provider.version"]


def test_the_connector_matches_pyspark_or_a_recorded_exception():
    pyspark = _pin((ROOT / "pyproject.toml").read_text(), "pyspark")
    assert _pom_properties()["spark.kafka.version"] == CONNECTOR_FOR.get(pyspark, pyspark)


# pyspark pin -> the Hadoop release of its jars (hadoop-client-api-<v>.jar); hadoop-aws must be that release.
HADOOP_OF_PYSPARK = {"4.3.0": "3.5.0"}


def test_hadoop_aws_is_the_hadoop_release_pyspark_ships():
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    props = ET.parse(ROOT / "hack/maven/s3a/pom.xml").getroot().find("m:properties", ns)
    hadoop_aws = {child.tag.split("}", 1)[1]: child.text for child in props}["hadoop.aws.version"]
    pyspark = _pin((ROOT / "pyproject.toml").read_text(), "pyspark")
    assert hadoop_aws == HADOOP_OF_PYSPARK[pyspark]
    try:
        import pyspark as installed
    except ImportError:
        return
    if installed.__version__ == pyspark:
        jars = Path(installed.__file__).parent / "jars"
        assert (jars / f"hadoop-client-api-{hadoop_aws}.jar").is_file(), sorted(p.name for p in jars.glob("hadoop-client-*"))
