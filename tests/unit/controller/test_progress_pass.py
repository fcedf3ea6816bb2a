"""The progress-only pass (controller.reconcile.progress_pass): from what the last pass saw and a new
record, a status write guarded by the last write's resourceVersion, and nothing else; anything more
than a status (an action, an event, a query not Running) is left to a full pass."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from contract.names import API_VERSION, KIND
from contract.progress import ProgressRecord
from controller import reconcile
from controller.decide.draft import Verb
from controller.phases import Phase
from controller.progress_read import Channel, ProgressRead, ReadResult
from controller.reconcile import Seen, progress_pass
from tests.unit.controller.world import UID, World

pytestmark = pytest.mark.unit


class StatusOnlyKube:
    """What a progress-only pass may touch: the status subresource, nothing else (any other call fails)."""

    def __init__(self, stored: dict, conflict: bool = False):
        self.status_expected: dict = {}
        self.patches: list[tuple[dict, str | None]] = []
        self.stored, self.conflict = dict(stored), conflict  # the status as the API server has it

    def patch_query_status(self, namespace: str, name: str, patch: dict, resource_version: str | None) -> dict:
        self.patches.append((patch, resource_version))
        if self.conflict:
            raise ApiException(status=409, reason="Conflict")
        self.stored = {k: v for k, v in {**self.stored, **patch}.items() if v is not None}  # a merge patch
        return {"metadata": {"name": name, "namespace": namespace, "uid": UID, "resourceVersion": str(8 + len(self.patches))},
                "status": self.stored}  # fmt: skip


def _running_world() -> World:
    world = World()
    world.settle()
    world.driver_runs()
    world.settle()
    assert world.status.phase is Phase.RUNNING
    return world


def _seen(world: World) -> Seen:
    body = {"apiVersion": API_VERSION, "kind": KIND, "spec": world.spec, "status": world.status.dump(),
            "metadata": {"name": world.name, "namespace": world.namespace, "uid": UID, "generation": world.generation,
                         "resourceVersion": "8"}}  # fmt: skip
    return Seen(replace(world.inputs(), progress=None, progress_read=False), body)


def _reads(monkeypatch: pytest.MonkeyPatch, record: ProgressRecord | None, refused: str | None = None) -> list:
    calls: list = []

    def read(kube: Any, namespace: str, status: Any, drivers: Any, log: Any) -> ProgressRead:
        calls.append(status.driver)
        if refused:
            return ProgressRead(channel=Channel.ENDPOINT, result=ReadResult.REFUSED, refused=refused)
        return ProgressRead(record, Channel.ENDPOINT, ReadResult.OK if record else ReadResult.NONE)

    monkeypatch.setattr(reconcile, "read_progress", read)
    return calls


def _record(batch: int, moment: str) -> ProgressRecord:
    return ProgressRecord.model_validate(
        {
            "query": "q",
            "mode": "continuous",
            "batchId": batch,
            "timestamp": moment,
            "lastCommitTime": moment,
            "committedOffsets": {"payments": {"0": batch}},
            "totalLag": 0,
        }  # fmt: skip
    ).for_status()


def test_a_new_record_is_one_status_write_guarded_by_the_last_writes_version(monkeypatch):
    world = _running_world()
    seen = _seen(world)
    reads = _reads(monkeypatch, _record(7, "2026-01-01T12:00:30Z"))
    kube = StatusOnlyKube(seen.body["status"])
    outcome = progress_pass(kube, seen, now=world.now + timedelta(seconds=30))
    assert outcome is not None and outcome.decision.verb is Verb.RUNNING
    assert reads == [world.status.driver]
    [(patch, version)] = kube.patches
    assert version == "8" and patch["progress"]["batchId"] == 7
    assert set(patch) <= {"progress", "conditions", "lastProgressTime"}, patch
    assert outcome.seen is not None and outcome.seen.body["metadata"]["resourceVersion"] == "9"
    assert kube.status_expected[world.namespace, world.name][-1]["progress"]["batchId"] == 7


def test_the_same_record_again_writes_nothing(monkeypatch):
    world = _running_world()
    _reads(monkeypatch, _record(7, "2026-01-01T12:00:30Z"))
    seen = _seen(world)
    kube = StatusOnlyKube(seen.body["status"])
    first = progress_pass(kube, seen, now=world.now + timedelta(seconds=30))
    assert first is not None and first.seen is not None
    again = progress_pass(kube, first.seen, now=world.now + timedelta(seconds=31))
    assert again is not None and len(kube.patches) == 1


def test_a_query_that_is_not_running_is_left_to_a_full_pass(monkeypatch):
    world = World()
    world.settle()  # a driver created, Pending: the query is Starting
    reads = _reads(monkeypatch, _record(1, "2026-01-01T12:00:01Z"))
    kube = StatusOnlyKube(world.status.dump())
    assert progress_pass(kube, _seen(world), now=world.now) is None
    assert reads == [] and kube.patches == []


def test_a_decision_with_an_event_is_left_to_a_full_pass(monkeypatch):
    world = _running_world()
    _reads(monkeypatch, None, refused="the driver answered 12 bytes that are not a progress record")
    kube = StatusOnlyKube(world.status.dump())
    assert progress_pass(kube, _seen(world), now=world.now + timedelta(seconds=15)) is None
    assert kube.patches == []  # the full pass writes the condition and posts the event, once


def test_a_conflict_asks_for_a_full_pass_at_once(monkeypatch):
    world = _running_world()
    _reads(monkeypatch, _record(8, "2026-01-01T12:00:40Z"))
    kube = StatusOnlyKube(world.status.dump(), conflict=True)
    outcome = progress_pass(kube, _seen(world), now=world.now + timedelta(seconds=40))
    assert outcome is not None and outcome.conflict and outcome.seen is None


def test_the_wire_body_of_a_seen_status_round_trips():
    world = _running_world()
    body = _seen(world).body
    assert json.loads(json.dumps(body))["status"]["phase"] == "Running"
