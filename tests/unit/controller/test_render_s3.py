"""An s3a:// checkpoint's Secret: mounted into the driver like the Kafka ones, its values nowhere."""

from __future__ import annotations

import json

import pytest

from contract import SECRETS_MOUNT_DIR
from controller import render
from tests.unit.controller.test_render import SETTINGS, make_run
from tests.unit.controller.world import base_spec

pytestmark = pytest.mark.unit

S3 = {
    "location": "s3a://checkpoints/payments",
    "s3": {"endpoint": "http://seaweedfs.storage:8333", "region": "us-east-1", "pathStyleAccess": True,
           "credentials": {"secretRef": {"name": "store-keys", "accessKeyIdKey": "id", "secretAccessKeyKey": "key"}}},
}  # fmt: skip


@pytest.mark.parametrize("backend", ["pod", "sparkApplication"])
def test_the_store_secret_is_mounted_read_only_by_name(backend):
    run = make_run(base_spec(checkpoint=S3, **{"runtime.backend": backend}))
    if backend == "pod":
        pod = render.driver_pod(run, SETTINGS)["spec"]
        vols, mounts = pod["volumes"], pod["containers"][0]["volumeMounts"]
    else:
        app = render.spark_application(run, SETTINGS)["spec"]
        vols, mounts = app["volumes"], app["driver"]["volumeMounts"]
    secret = [v for v in vols if "secret" in v and v["secret"]["secretName"] == "store-keys"]
    assert len(secret) == 1 and secret[0]["secret"]["defaultMode"] == 0o440
    mount = next(m for m in mounts if m["name"] == secret[0]["name"])
    assert mount == {"name": secret[0]["name"], "mountPath": f"{SECRETS_MOUNT_DIR}/store-keys", "readOnly": True}


def test_one_secret_for_kafka_and_the_store_is_mounted_once():
    spec = base_spec(checkpoint={**S3, "s3": {**S3["s3"], "credentials": {"secretRef": {"name": "kafka-creds"}}}},
                     **{"source.kafka.auth": {"secretRef": {"name": "kafka-creds"}}})  # fmt: skip
    pod = render.driver_pod(make_run(spec), SETTINGS)
    assert [v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v] == ["kafka-creds"]


def test_the_query_document_names_the_secret_only():
    cm = render.config_map(make_run(base_spec(checkpoint=S3)), SETTINGS)
    doc = json.loads(cm["data"]["query.json"])
    assert doc["spec"]["checkpoint"]["s3"]["credentials"] == {
        "secretRef": {"name": "store-keys", "accessKeyIdKey": "id", "secretAccessKeyKey": "key"}
    }
    assert not any(k.startswith("spark.hadoop.fs.s3a.") and k.endswith(("access.key", "secret.key"))
                   for k in doc["spec"].get("runtime", {}).get("sparkConf", {}))  # fmt: skip


def test_no_store_secret_without_credentials():
    spec = base_spec(checkpoint={"location": "s3a://checkpoints/payments", "s3": {"region": "eu-west-1"}})
    pod = render.driver_pod(make_run(spec), SETTINGS)
    assert not any(v["name"] == "s3-auth" for v in pod["spec"]["volumes"])
