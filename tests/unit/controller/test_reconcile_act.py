"""reconcile_once carries out a decision, and decides nothing while acting: a driver the API
refuses to create stops the actions, and the status written says why (creation_failed)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from app.contract.names import API_VERSION, KIND
from controller.config import Settings
from controller.phases import ConditionType, Phase, Reason
from controller.reconcile import CREATE_RETRY_S, reconcile_once
from tests.unit.controller.world import T0, UID, base_spec

pytestmark = pytest.mark.unit


class RefusingKube:
    """Just what one pass of a new query touches; every create is refused with ``error``."""

    def __init__(self, spec: dict, error: str):
        self.body = {"apiVersion": API_VERSION, "kind": KIND, "spec": spec,
                     "metadata": {"name": "q", "namespace": "ns", "uid": UID, "generation": 1, "resourceVersion": "7"}}  # fmt: skip
        self.error, self.calls, self.patches = error, [], []

    def get_query(self, namespace: str, name: str) -> dict[str, Any]:
        return self.body

    def list_pods(self, namespace: str, selector: str) -> list:
        return []

    def list_spark_applications(self, namespace: str, selector: str) -> list:
        return []

    def apply_config_map(self, obj: dict) -> None:
        self.calls.append(("apply", obj["kind"]))

    def apply_role_binding(self, obj: dict) -> bool:
        self.calls.append(("apply", obj["kind"]))
        return True

    def create(self, obj: dict) -> bool:
        self.calls.append(("create", obj["kind"]))
        raise _forbidden(self.error)

    def apply_service(self, obj: dict) -> bool:
        self.calls.append(("apply", obj["kind"]))
        return True

    def patch_query_status(self, namespace: str, name: str, patch: dict, resource_version: str | None) -> dict:
        self.patches.append((patch, resource_version))
        return self.body


def _forbidden(message: str) -> ApiException:
    exc = ApiException(status=403, reason="Forbidden")
    exc.body = json.dumps({"message": message})
    return exc


def test_a_refused_create_stops_the_actions_and_the_status_says_why_and_retries():
    error = 'pods "q-driver-1" is forbidden: exceeded quota: q, requested: cpu=1'
    kube = RefusingKube(base_spec(**{"runtime.sparkUI": True}), error)
    outcome = reconcile_once(kube, Settings(job_image="streamq:9.9.9", spark_version="4.3.0"), "ns", "q", now=T0)
    decision = outcome.decision
    assert decision.verb == "create-failed" and decision.requeue_after == CREATE_RETRY_S
    assert decision.status.phase is Phase.PENDING and decision.status.attempt == 0
    assert decision.status.message == f"cannot create the driver: {error}"
    degraded = decision.status.condition(ConditionType.DEGRADED)
    assert (degraded.status, degraded.reason) == ("True", Reason.DRIVER_CREATE_FAILED)
    assert [e.reason for e in decision.events] == [Reason.DRIVER_CREATE_FAILED]
    # the refused create was the last action carried out: no UI Service for a driver that is not there
    assert kube.calls[-1][0] == "create" and ("apply", "Service") not in kube.calls
    (patch, version), = kube.patches
    assert version == "7" and patch["phase"] == "Pending" and patch["message"] == decision.status.message
