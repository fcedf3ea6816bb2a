"""The CRD: generated from the spec model, structural, and in sync with the repository."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from contract import spec as spec_model
from controller import crd

pytestmark = pytest.mark.unit

FORBIDDEN = {"$ref", "$defs", "anyOf", "oneOf", "allOf", "not", "title", "default", "const", "definitions"}


def walk(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, child in (node.get("properties") or {}).items():
        yield from walk(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}{{}}")


@pytest.fixture(scope="module")
def rendered() -> dict[str, Any]:
    return crd.render_crd()


@pytest.fixture(scope="module")
def schema(rendered) -> dict[str, Any]:
    return rendered["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


@pytest.mark.parametrize("path", crd.OUTPUTS, ids=lambda p: str(p.relative_to(crd.REPO_ROOT)))
def test_generated_files_match_render_crd(path):
    assert path.exists(), f"{path} is missing: run `python -m controller.crd`"
    assert path.read_text() == crd.render_yaml(), f"{path} drifted from the spec model: run `python -m controller.crd`"
    assert yaml.safe_load(path.read_text()) == crd.render_crd()


def test_check_mode_reports_drift(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "crd.yaml"
    stale.write_text("old\n")
    monkeypatch.setattr(crd, "OUTPUTS", (stale,))
    assert crd.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert crd.main([]) == 0 and stale.read_text() == crd.render_yaml()
    assert crd.main(["--check"]) == 0


MARKERS = {".spec.trigger.availableNow"}  # objects without fields: set or not


def test_schema_is_structural(schema):
    for path, node in walk(schema):
        # one default, the status's: a query the operator has not seen reads observedGeneration 0 (kstatus)
        forbidden = FORBIDDEN - {"default"} if path == ".status" else FORBIDDEN
        assert not forbidden & node.keys(), f"{path}: {forbidden & node.keys()}"
        assert node.get("additionalProperties") is not False, path
        assert "type" in node or node.get("x-kubernetes-preserve-unknown-fields"), f"{path} has no type"
        # the API server drops an empty map, so a GitOps tool comparing the chart's CRD with the served
        # one finds it missing on every sync (Argo CD: OutOfSync forever): a marker object has none
        assert node.get("properties") != {}, f"{path}: properties: {{}} is dropped when the CRD is stored"
        if node.get("type") == "object" and path not in ("", ".metadata", *MARKERS):
            assert "properties" in node or "additionalProperties" in node or node.get("x-kubernetes-preserve-unknown-fields"), (
                f"{path}: an object needs properties"
            )
            assert not ("properties" in node and "additionalProperties" in node), path
        if node.get("type") == "array":
            assert isinstance(node.get("items"), dict), path
        for exclusive in ("exclusiveMinimum", "exclusiveMaximum"):  # OpenAPI 3.0: a flag beside the bound
            assert isinstance(node.get(exclusive, True), bool), f"{path}.{exclusive} = {node[exclusive]!r}"


def _spec_models(cls: type[BaseModel], node: dict[str, Any], path: str) -> Iterator[tuple[str, type, dict]]:
    yield path, cls, node
    for name, field in cls.model_fields.items():
        alias = field.alias or name
        assert alias in node["properties"], f"{path}.{alias} missing from the CRD"
        child = node["properties"][alias]
        for arg in crd._model_args(field.annotation):
            target = child["items"] if child.get("type") == "array" else child
            yield from _spec_models(arg, target, f"{path}.{alias}")


def test_every_model_field_is_in_the_schema_and_required_matches(schema):
    spec = schema["properties"]["spec"]
    for path, cls, node in _spec_models(spec_model.QuerySpec, spec, "spec"):
        required = {f.alias or n for n, f in cls.model_fields.items() if f.is_required()}
        assert set(node.get("required", [])) == required, path
        assert set(node.get("properties", {})) == {f.alias or n for n, f in cls.model_fields.items()}, path


def test_unions_say_exactly_one_of(schema):
    spec = schema["properties"]["spec"]["properties"]
    unions = {
        "source": spec["source"],
        "sink": spec["sink"],
        "trigger": spec["trigger"],
        "transforms[]": spec["transforms"]["items"],
    }
    for name, node in unions.items():
        (rule,) = node["x-kubernetes-validations"]
        keys = list(node["properties"])
        assert rule["message"] == f"set exactly one of: {', '.join(keys)}", name
        assert all(f"has(self.{k})" in rule["rule"] for k in keys), name


def test_enums_patterns_and_bounds_are_kept(schema):
    spec = schema["properties"]["spec"]["properties"]
    assert spec["outputMode"]["enum"] == ["append", "update", "complete"]
    assert spec["runtime"]["properties"]["backend"]["enum"] == ["pod", "sparkApplication"]
    assert spec["runtime"]["properties"]["parallelism"]["minimum"] == 1
    assert spec["runtime"]["properties"]["parallelism"]["maximum"] == 1024
    assert (
        spec["trigger"]["properties"]["continuous"]["properties"]["checkpointInterval"]["pattern"] == spec_model.DURATION_PATTERN
    )
    assert spec["source"]["properties"]["kafka"]["properties"]["topics"]["minItems"] == 1
    assert spec["source"]["properties"]["kafka"]["properties"]["options"]["additionalProperties"] == {
        "type": "string",
        "maxLength": 4096,
    }
    assert spec["transforms"]["maxItems"] == 64
    max_restarts = spec["restartPolicy"]["properties"]["maxRestarts"]
    assert max_restarts["minimum"] == -1 and "nullable" not in max_restarts  # -1 means unlimited
    assert "nullable" not in spec["runtime"]["properties"]["image"]


def test_cross_field_rules_are_cel(schema):
    rules = schema["properties"]["spec"]["x-kubernetes-validations"]
    messages = [r.get("message") or r.get("messageExpression") for r in rules]
    assert "realTime mode cannot read from a rate source (allowed: kafka)" in messages
    assert any("continuous mode supports only append output" in m for m in messages)
    assert any("realTime mode supports only update output" in m for m in messages)
    assert any("more task slots than source partitions" in m for m in messages)
    for rule in rules:
        assert rule["rule"] and ("message" in rule or "messageExpression" in rule)
    backoff = schema["properties"]["spec"]["properties"]["restartPolicy"]["properties"]["backoff"]
    assert "duration(" in backoff["x-kubernetes-validations"][0]["rule"]


def test_status_subresource_columns_and_names(rendered, schema):
    version = rendered["spec"]["versions"][0]
    # /scale: kubectl scale, an HPA or KEDA write the spec's executors; status says how many run, and which pods
    assert version["subresources"] == {"status": {}, "scale": {
        "specReplicasPath": ".spec.runtime.executors.instances", "statusReplicasPath": ".status.executors",
        "labelSelectorPath": ".status.executorSelector"}}  # fmt: skip
    assert {"executors", "executorSelector"} <= set(schema["properties"]["status"]["properties"])
    assert rendered["metadata"]["name"] == "streamingqueries.streamq.io"
    names = rendered["spec"]["names"]
    assert names["shortNames"] == ["sq"] and names["kind"] == "StreamingQuery"
    # Not in "all": `kubectl delete all --all` must leave the queries alone (issue 38).
    assert names["categories"] == ["streamq"]
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Phase": ".status.phase", "Reason": '.status.conditions[?(@.type=="Ready")].reason', "Mode": ".status.mode", "Restarts": ".status.restarts",
        "Epoch": ".status.progress.batchId", "Lag": ".status.progress.totalLag",
        "Health": ".status.progress.health.state", "Last-Commit": ".status.progress.lastCommitTime",
        "Slots": ".status.progress.slots", "Driver": ".status.driver", "Upgrade": ".status.upgrade.state", "Message": ".status.message",
        "Executors": ".status.executors", "Recommended": ".status.autoscaling.recommendedExecutors",  # -o wide
        "Age": ".metadata.creationTimestamp",
    }  # fmt: skip
    default_columns = [c["name"] for c in version["additionalPrinterColumns"] if not c.get("priority")]
    assert default_columns == ["Phase", "Reason", "Mode", "Restarts", "Epoch", "Lag", "Age"]
    status = schema["properties"]["status"]["properties"]
    for key in (
        "phase",
        "conditions",
        "observedGeneration",
        "driver",
        "restarts",
        "lastFailure",
        "progress",
        "lastReconciledSpec",
    ):
        assert key in status, key
    assert status["progress"]["x-kubernetes-preserve-unknown-fields"] is True
    assert set(status["lastFailure"]["properties"]) >= {"reason", "message", "time"}
    assert status["phase"]["enum"] == [
        "Pending",
        "Starting",
        "Running",
        "Restarting",
        "Upgrading",
        "Suspended",
        "Failed",
        "Invalid",
        "Completed",
    ]
    assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]


def test_a_query_the_operator_has_not_seen_reads_generation_0_observed(schema):
    """kstatus (Flux's `wait`) calls a custom resource without status Current: a new query's Kustomization
    was Ready before its driver started. The API server applies this default on every read."""
    assert schema["properties"]["status"]["default"] == {"observedGeneration": 0}
