"""The operator's policy: read from STREAMQ_POLICY_FILE, which the Deployment points at
the ConfigMap the chart (and manifests/base) renders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from contract.policy import OperatorFacts, Policy
from controller.config import POLICY_FILE_ENV, Settings, load_policy

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]


def test_no_file_means_the_charts_default_policy():
    settings = Settings.from_env({})
    assert settings.policy == Policy()
    assert settings.facts == OperatorFacts()


@pytest.mark.parametrize("dump", [yaml.safe_dump, json.dumps], ids=["yaml", "json"])
def test_the_policy_file_is_read(tmp_path, dump):
    path = tmp_path / "policy"
    path.write_text(dump({"maxExecutors": 2, "allowedImages": ["registry.example/*"]}))
    settings = Settings.from_env({
        POLICY_FILE_ENV: str(path),
        "STREAMQ_JOB_IMAGE": "registry.example/streamq:2",
        "STREAMQ_OPERATOR_SERVICE_ACCOUNT": "sq-operator",
        "STREAMQ_OPERATOR_NAMESPACE": "platform",
    })  # fmt: skip
    assert settings.policy == Policy(max_executors=2, allowed_images=["registry.example/*"])
    assert settings.facts == OperatorFacts("registry.example/streamq:2", "streamq-driver", "sq-operator", "platform")


def test_a_broken_policy_stops_the_operator(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("maxExecutors: many\n")
    with pytest.raises(ValueError, match="not a valid policy"):
        load_policy(path)
    with pytest.raises(ValueError, match="cannot read"):
        load_policy(tmp_path / "missing.yaml")


def test_manifests_base_mounts_the_policy_where_the_operator_reads_it():
    docs = [d for d in yaml.safe_load_all((ROOT / "manifests" / "base" / "operator.yaml").read_text()) if d]
    (deploy,) = [d for d in docs if d["kind"] == "Deployment"]
    pod = deploy["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    policy_file = Path(env[POLICY_FILE_ENV]["value"])
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == str(policy_file.parent)]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    (config_map,) = [d for d in yaml.safe_load_all((ROOT / "manifests" / "base" / "policy.yaml").read_text()) if d]
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    assert policy_file.name in config_map["data"]
    assert env["STREAMQ_OPERATOR_SERVICE_ACCOUNT"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.serviceAccountName"
    assert env["STREAMQ_OPERATOR_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
