"""runtime.driver and runtime.executors placement and metadata reach the pods (controller.placement):
the driver pod (standby and warm-upgrade drivers too: one renderer), the executors' pod template
and a SparkApplication's driver and executor; the operator's own labels, annotations,
tolerations and anti-affinity stay as they are."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from contract.load import validate_spec
from controller import names, render
from controller.config import Settings
from controller.run import Run, run_fields, spec_hash
from tests.unit.controller.world import base_spec

pytestmark = pytest.mark.unit

SETTINGS = Settings(job_image="streamq:9.9.9", spark_version="4.3.0")

NODE_SELECTOR = {"kubernetes.io/os": "linux", "pool": "streaming"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "streaming", "effect": "NoSchedule"}
EVICTION = {"key": "spot", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
NODE_AFFINITY = {
    "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["eu-1a", "eu-1b"]}]}
        ]
    }
}
POD_ANTI_AFFINITY = {
    "preferredDuringSchedulingIgnoredDuringExecution": [
        {
            "weight": 50,
            "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "batch"}}, "topologyKey": "kubernetes.io/hostname"},
        }
    ]
}


def placed(priority: str, label: str) -> dict[str, Any]:
    return {
        "nodeSelector": NODE_SELECTOR,
        "tolerations": [TOLERATION, EVICTION],
        "affinity": {"nodeAffinity": NODE_AFFINITY, "podAntiAffinity": POD_ANTI_AFFINITY},
        "priorityClassName": priority,
        "labels": {"team.example.com/cost-center": label},
        "annotations": {"prometheus.io/scrape": "true", "team.example.com/owner": "payments@example.com"},
    }


def make_run(standby: bool = False, backend: str = "pod", instances: int = 2, **changes: Any) -> Run:
    spec = base_spec(**{
        "runtime.backend": backend,
        "runtime.driver": {"cores": 1, **placed("streaming-high", "cc-1")},
        "runtime.executors": {"instances": instances, **placed("streaming-batch", "cc-2")},
        **changes,
    })  # fmt: skip
    parsed = validate_spec(spec)
    return Run(query="payments", namespace="team-a", attempt=3, spec=parsed,
                      checkpoint_location=parsed.checkpoint.location, standby=standby)  # fmt: skip


def operator_tolerations(run: Run) -> list[dict[str, Any]]:
    return render.driver_tolerations(run, SETTINGS)


@pytest.mark.parametrize("standby", [False, True], ids=["driver", "standby driver"])
def test_the_driver_pod_shows_every_field(standby):
    run = make_run(standby=standby)
    pod = render.driver_pod(run, SETTINGS)
    spec, meta = pod["spec"], pod["metadata"]
    assert spec["nodeSelector"] == NODE_SELECTOR
    assert spec["priorityClassName"] == "streaming-high"
    assert spec["tolerations"] == [*operator_tolerations(run), TOLERATION, EVICTION]
    assert spec["affinity"] == {"nodeAffinity": NODE_AFFINITY, "podAntiAffinity": POD_ANTI_AFFINITY}
    assert meta["labels"]["team.example.com/cost-center"] == "cc-1"
    assert meta["annotations"]["prometheus.io/scrape"] == "true"
    assert meta["annotations"]["team.example.com/owner"] == "payments@example.com"
    # the operator's own metadata is all still there
    assert names.labels("payments", names.COMPONENT_DRIVER, 3).items() <= meta["labels"].items()
    assert meta["annotations"][names.ANNOTATION_SPEC_HASH] == spec_hash(run.spec, run.checkpoint_location)
    assert (meta["labels"].get(names.LABEL_ROLE) == names.ROLE_STANDBY) is standby


def test_a_standby_querys_drivers_keep_their_anti_affinity_beside_the_specs():
    run = make_run(**{"runtime.standby": True, "runtime.executors": {"instances": 0},
                      "checkpoint.volume": {"persistentVolumeClaim": {"claimName": "streamq-cp"}}})  # fmt: skip
    affinity = render.driver_pod(run, SETTINGS)["spec"]["affinity"]
    operator = render.driver_affinity(run)
    assert operator is not None
    preferred = affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred == [*POD_ANTI_AFFINITY["preferredDuringSchedulingIgnoredDuringExecution"],
                         *operator["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]]  # fmt: skip
    assert affinity["nodeAffinity"] == NODE_AFFINITY


def test_without_placement_the_driver_pod_is_as_before():
    run = dataclasses.replace(make_run(), spec=validate_spec(base_spec()))
    spec, meta = (pod := render.driver_pod(run, SETTINGS))["spec"], pod["metadata"]
    assert "nodeSelector" not in spec and "priorityClassName" not in spec and "affinity" not in spec
    assert spec["tolerations"] == operator_tolerations(run)
    assert meta["labels"] == names.labels("payments", names.COMPONENT_DRIVER, 3)
    assert set(meta["annotations"]) == {names.ANNOTATION_SPEC_HASH, names.ANNOTATION_CHECKPOINT,
                                        names.ANNOTATION_RESTART_NONCE}  # fmt: skip


def test_the_operators_labels_win_over_a_spec_no_policy_checked():
    """``streamq run`` and a missing policy check no keys: the pod still carries the operator's."""
    run = make_run(**{"runtime.driver": {"labels": {names.LABEL_QUERY: "other"},
                                         "annotations": {names.ANNOTATION_SPEC_HASH: "forged"}}})  # fmt: skip
    meta = render.driver_pod(run, SETTINGS)["metadata"]
    assert meta["labels"][names.LABEL_QUERY] == "payments"
    assert meta["annotations"][names.ANNOTATION_SPEC_HASH] != "forged"


def test_the_executor_pod_template_carries_the_executors_placement():
    run = make_run()
    template = json.loads(render.config_map(run, SETTINGS)["data"][render.EXECUTOR_TEMPLATE_FILE])
    spec = template["spec"]
    assert spec["nodeSelector"] == NODE_SELECTOR
    assert spec["priorityClassName"] == "streaming-batch"
    assert spec["tolerations"] == [TOLERATION, EVICTION]
    assert spec["affinity"] == {"nodeAffinity": NODE_AFFINITY, "podAntiAffinity": POD_ANTI_AFFINITY}
    assert template["metadata"] == {
        "labels": {"team.example.com/cost-center": "cc-2"},
        "annotations": {"prometheus.io/scrape": "true", "team.example.com/owner": "payments@example.com"},
    }
    assert spec["automountServiceAccountToken"] is False  # still the restricted template
    assert spec["securityContext"] == render.pod_security_context(SETTINGS)


def test_an_executor_template_without_placement_has_none():
    run = make_run(**{"runtime.executors": {"instances": 1}})
    template = json.loads(render.config_map(run, SETTINGS)["data"][render.EXECUTOR_TEMPLATE_FILE])
    assert "metadata" not in template
    assert not {"nodeSelector", "tolerations", "affinity", "priorityClassName"} & set(template["spec"])


def test_a_spark_application_carries_both_placements():
    run = make_run(backend="sparkApplication")
    app = render.spark_application(run, SETTINGS)["spec"]
    driver, executor = app["driver"], app["executor"]
    assert driver["nodeSelector"] == NODE_SELECTOR and executor["nodeSelector"] == NODE_SELECTOR
    assert driver["priorityClassName"] == "streaming-high" and executor["priorityClassName"] == "streaming-batch"
    assert driver["tolerations"] == [*operator_tolerations(run), TOLERATION, EVICTION]
    assert executor["tolerations"] == [TOLERATION, EVICTION]
    assert driver["affinity"]["nodeAffinity"] == NODE_AFFINITY == executor["affinity"]["nodeAffinity"]
    assert driver["labels"]["team.example.com/cost-center"] == "cc-1"
    assert executor["labels"]["team.example.com/cost-center"] == "cc-2"
    assert names.labels("payments", names.COMPONENT_EXECUTOR, 3).items() <= executor["labels"].items()
    assert driver["annotations"]["prometheus.io/scrape"] == "true" and names.ANNOTATION_SPEC_HASH in driver["annotations"]
    assert executor["annotations"] == {"prometheus.io/scrape": "true", "team.example.com/owner": "payments@example.com"}


def test_placement_is_part_of_what_a_driver_runs():
    """A new priority class or node selector needs a new driver pod: the spec hash says so."""
    before = make_run()
    after = make_run(**{"runtime.driver": {"priorityClassName": "streaming-low"}})
    assert spec_hash(before.spec, "x") != spec_hash(after.spec, "x")


def test_a_spec_without_placement_keeps_its_spec_hash():
    """The new fields are unset (None), not empty: an operator upgrade restarts no driver."""
    assert "nodeSelector" not in json.dumps(run_fields(validate_spec(base_spec())))
