"""reconcile_once carries out a decision, and decides nothing while acting: a driver the API
refuses to create stops the actions; act says why as a typed refusal, and the status written
is the next decision's, which says why (creation_failed)."""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from contract.names import API_VERSION, KIND
from controller import act
from controller.config import Settings
from controller.decide import CREATE_RETRY_S, Refusal
from controller.kube import NameConflict
from controller.phases import ConditionType, Phase, Reason
from controller.reconcile import expected_after_write, reconcile_once
from tests.unit.controller.world import T0, UID, base_spec

pytestmark = pytest.mark.unit


class RefusingKube:
    """Just what one pass of a new query touches; every create is refused with ``error`` (the API
    server's message for a 403, or what kube raises)."""

    def __init__(self, spec: dict, error: str | Exception):
        self.status_expected: dict = {}  # as Kube keeps it (handlers.query_changed reads it)
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
        raise self.error if isinstance(self.error, Exception) else _forbidden(self.error)

    def apply_service(self, obj: dict) -> bool:
        self.calls.append(("apply", obj["kind"]))
        return True

    def patch_query_status(self, namespace: str, name: str, patch: dict, resource_version: str | None) -> dict:
        self.patches.append((patch, resource_version))
        return self.body


def _forbidden(message: str, status: int = 403) -> ApiException:
    exc = ApiException(status=status, reason="Forbidden")
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
    ((patch, version),) = kube.patches
    assert version == "7" and patch["phase"] == "Pending" and patch["message"] == decision.status.message


def test_a_name_another_object_holds_is_said_as_a_name_conflict():
    taken = NameConflict("Pod", "q-driver-1", {"ownerReferences": []})
    kube = RefusingKube(base_spec(), taken)
    outcome = reconcile_once(kube, Settings(job_image="streamq:9.9.9", spark_version="4.3.0"), "ns", "q", now=T0)
    decision = outcome.decision
    assert decision.verb == "create-failed" and decision.status.message == f"cannot create the driver: {taken}"
    assert decision.status.condition(ConditionType.DEGRADED).reason == Reason.NAME_CONFLICT
    assert [e.reason for e in decision.events] == [Reason.NAME_CONFLICT]


def test_a_refusal_is_decided_on_and_not_acted_on_again():
    kube = RefusingKube(base_spec(), 'pods "q-driver-1" is forbidden: exceeded quota: q')
    outcome = reconcile_once(kube, Settings(job_image="streamq:9.9.9", spark_version="4.3.0"), "ns", "q", now=T0)
    assert outcome.decision.actions == ()
    assert len([c for c in kube.calls if c[0] == "create"]) == 1  # one pass, one attempt to create


@pytest.mark.parametrize(
    ("status", "message", "refusal"),
    [
        (
            403,
            'pods "q-driver-1" is forbidden: exceeded quota: small, requested: cpu=1, used: cpu=1, limited: cpu=1',
            Refusal.QUOTA,
        ),
        (403, 'pods "q-driver-1" is forbidden: failed quota: small: must specify cpu', Refusal.OTHER),  # no limits set
        (403, 'pods "q-driver-1" is forbidden: User "system:serviceaccount:x:y" cannot create resource', Refusal.OTHER),
        (422, 'Pod "q-driver-1" is invalid: spec.containers[0].image: Required value', Refusal.OTHER),
        (500, "exceeded quota", Refusal.OTHER),  # not a refusal by a quota, whatever the words
    ],
)
def test_act_reads_why_the_api_refused_from_its_answer(status, message, refusal):
    assert act.refusal(_forbidden(message, status)) is refusal


def test_acting_uses_the_decision_s_types_and_none_of_its_functions():
    tree = ast.parse(Path(act.__file__).read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import) and any("decide" in a.name for a in n.names)]
    from_decide = [
        (n.module, a.name)
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("controller.decide")
        for a in n.names
    ]
    assert from_decide and not [
        a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module == "controller"
        for a in n.names
        if a.name == "decide"
    ]
    for module, name in from_decide:
        assert isinstance(getattr(importlib.import_module(module), name), type), f"act imports {name} from {module}"


def test_the_status_a_pass_writes_is_expected_before_it_is_written_so_its_echo_wakes_nobody():
    kube = RefusingKube(base_spec(), "quota exceeded")
    reconcile_once(kube, Settings(), "ns", "q")
    written = kube.patches[-1][0]  # a new query: the patch is the whole status
    assert kube.status_expected["ns", "q"] == expected_after_write(kube.body, written)
    edited = {**kube.body, "metadata": {**kube.body["metadata"], "generation": 2}}  # a spec change is news
    assert kube.status_expected["ns", "q"] != expected_after_write(edited, written)
