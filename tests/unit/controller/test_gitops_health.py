"""Health as Argo CD and kstatus (Flux) compute it, over statuses the operator's own
decisions wrote: every state a query can be in, judged alike by both tools and by
``kubectl wait --for=condition=Ready``."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from controller.observe import DriverPhase
from controller.phases import Phase
from tests.unit.controller.gitops_rules import ARGO_SCRIPT, argo_health, kstatus, query_object
from tests.unit.controller.world import World, base_spec

pytestmark = pytest.mark.unit

GITOPS_DOC = Path(__file__).resolve().parents[3] / "docs" / "gitops.md"
QUICK = {
    "restartPolicy.maxRestarts": 1,
    "restartPolicy.backoff": {"initial": "1s", "max": "1s"},
    "checkpoint.volume": {"persistentVolumeClaim": {"claimName": "ck"}},
}  # shared: spec changes are warm upgrades


def _starting() -> World:
    w = World(base_spec(**QUICK))
    w.reconcile()
    return w


def _running() -> World:
    w = _starting()
    w.driver_runs()
    w.reconcile()
    return w


def _state(name: str) -> World:
    """A world whose query is in state ``name``, reached through the decisions alone."""
    match name:
        case "starting":
            return _starting()
        case "running":
            return _running()
        case "unschedulable":
            w = _starting()
            w.drivers[0] = replace(w.driver, waiting='Unschedulable: persistentvolumeclaim "c" not found',
                                   waiting_reason="Unschedulable")  # fmt: skip
            w.reconcile()
        case "replacing after a spec change":
            w = _running()
            w.edit(**{"transforms": [{"where": "value > 7"}], "upgrade": {"strategy": "restart"}})
            w.reconcile()
        case "upgrading: the new driver warms up":
            w = _running()
            w.edit(**{"transforms": [{"where": "value > 7"}]})
            w.reconcile()
        case "upgrading: handing over":
            w = _state("upgrading: the new driver warms up")
            w.change("q-driver-2", phase=DriverPhase.RUNNING, ready=True)
            w.reconcile()
        case "upgrade failed":
            w = _state("upgrading: the new driver warms up")
            w.change("q-driver-2", phase=DriverPhase.FAILED, exit_code=1, finished_at=w.now)
            w.reconcile()
        case "running, stall reported":
            w = _running()
            w.driver_reports(batchId=4, health={"state": "Stalled", "message": "no commit for 12s (limit 10s)"})
            w.reconcile()
        case "restarting":
            w = _running()
            w.driver_exits(70, "QUERY_FAILED: broker gone")
            w.reconcile()
        case "out of restarts":
            w = _running()
            w.driver_exits(70)
            w.reconcile()
            w.advance(1)
            w.settle()
            w.driver_exits(70)
            w.reconcile()
        case "invalid":
            w = _starting()
            w.edit(**{"transforms": [{"select": ["max(value)"]}]})
            w.settle()
        case "refused by the driver":
            w = _starting()
            w.driver_exits(65, "QUERY_REFUSED: Continuous processing does not support Aggregate operations.")
            w.reconcile()
        case "incompatible change":
            w = _running()
            w.edit(**{"source.kafka.topics": ["orders"]})
            w.reconcile()
        case "suspended":
            w = _running()
            w.edit(suspend=True)
            w.settle()
        case "completed":
            w = World(base_spec(**QUICK, **{"restartPolicy.type": "Never"}))
            w.reconcile()
            w.driver_runs()
            w.reconcile()
            w.driver_exits(0)
            w.reconcile()
        case "spec edited, not seen yet":
            w = _running()
            w.edit(**{"transforms": [{"where": "value > 7"}]})  # no reconcile: status is one generation behind
        case _:
            raise AssertionError(name)
    return w


# state -> (phase, Argo CD health, kstatus, Ready)
EXPECTED = {
    "starting": (Phase.STARTING, "Progressing", "InProgress", "False"),
    "running": (Phase.RUNNING, "Healthy", "Current", "True"),
    "unschedulable": (Phase.STARTING, "Degraded", "InProgress", "False"),  # said, but retried: not Failed
    "replacing after a spec change": (Phase.RESTARTING, "Progressing", "InProgress", "False"),
    # the old spec's driver serves meanwhile, but the spec is not realised until the new one does
    "upgrading: the new driver warms up": (Phase.UPGRADING, "Progressing", "InProgress", "False"),
    "upgrading: handing over": (Phase.UPGRADING, "Progressing", "InProgress", "False"),
    "upgrade failed": (Phase.RUNNING, "Degraded", "Failed", "True"),  # the old spec runs; this one will not
    "running, stall reported": (Phase.RUNNING, "Degraded", "Current", "True"),  # it runs; the data does not move
    "restarting": (Phase.RESTARTING, "Degraded", "InProgress", "False"),
    "out of restarts": (Phase.FAILED, "Degraded", "Failed", "False"),
    "invalid": (Phase.INVALID, "Degraded", "Failed", "False"),
    "refused by the driver": (Phase.INVALID, "Degraded", "Failed", "False"),
    "incompatible change": (Phase.RUNNING, "Degraded", "Failed", "True"),  # the old spec runs; the new one never will
    "suspended": (Phase.SUSPENDED, "Suspended", "Current", "False"),
    "completed": (Phase.COMPLETED, "Healthy", "Current", "False"),
    "spec edited, not seen yet": (Phase.RUNNING, "Progressing", "InProgress", "True"),
}


@pytest.mark.parametrize("state", EXPECTED)
def test_argo_cd_and_kstatus_agree_with_the_phase(state):
    w = _state(state)
    phase, argo, kstat, ready = EXPECTED[state]
    assert w.status.phase is phase
    obj = query_object(w.status, w.generation)
    health, message = argo_health(obj)
    assert (health, kstatus(obj)) == (argo, kstat), message
    assert {c.type.value: c.status for c in w.status.conditions}["Ready"] == ready  # kubectl wait --for=condition=Ready
    assert message  # Argo CD shows it next to the health: never empty


def test_argo_cd_says_why_in_the_operators_words():
    obj = query_object(_state("unschedulable").status, 1)
    assert argo_health(obj)[1].startswith("driver q-driver-1 cannot start") and "not found" in argo_health(obj)[1]
    invalid = _state("invalid")
    assert argo_health(query_object(invalid.status, invalid.generation))[1].startswith("invalid spec: ")


def test_a_query_the_operator_has_not_seen_is_progressing_for_both():
    obj = query_object({}, 1)
    del obj["status"]
    assert argo_health(obj)[0] == "Progressing"
    assert kstatus(obj) == "Current"  # kstatus' own rule for a resource without status: why observedGeneration matters
    assert kstatus(query_object({"observedGeneration": 1, "conditions": []}, 2)) == "InProgress"


def test_stalled_and_reconciling_are_never_both_true():
    for state in EXPECTED:
        conditions = {c.type.value: c.status for c in _state(state).status.conditions}
        assert not (conditions["Stalled"] == "True" and conditions["Reconciling"] == "True"), state


def test_the_rules_here_can_tell_states_apart():
    """The evaluators themselves: a script or rule that said one thing for everything would pass nothing above."""
    assert (
        kstatus(
            query_object(
                {
                    "observedGeneration": 1,
                    "conditions": [{"type": "Stalled", "status": "True"}, {"type": "Reconciling", "status": "True"}],
                },
                1,
            )
        )
        == "Failed"
    )  # first wins
    assert kstatus({"metadata": {"generation": 1, "deletionTimestamp": "2026-01-01T00:00:00Z"}}) == "Terminating"
    assert argo_health(
        {"metadata": {}}, 'return {status = "Healthy", message = obj.metadata.generation == nil and "x" or "y"}'
    ) == ("Healthy", "x")


def test_docs_gitops_shows_the_script_that_is_tested():
    doc = GITOPS_DOC.read_text()
    block = re.search(r"resource\.customizations\.health\.streamq\.io_StreamingQuery: \|\n((?:    .*\n|\n)+)", doc)
    assert block, "docs/gitops.md has no health customization block"
    shown = "\n".join(line[4:] for line in block.group(1).rstrip("\n").split("\n")) + "\n"
    assert shown == ARGO_SCRIPT.read_text(), "docs/gitops.md and docs/argocd-health.lua differ: paste the file into the doc"


# Objects the operator wrote on a real kube-apiserver (tests/integration/test_operator_health.py,
# run with STREAMQ_CAPTURE_STATUSES=1): state -> (Argo CD health, kstatus).
CAPTURED = Path(__file__).with_name("captured_statuses.json")
CAPTURED_EXPECTED = {
    "starting": ("Progressing", "InProgress"),
    "running": ("Healthy", "Current"),
    "unschedulable": ("Degraded", "InProgress"),
    "invalid": ("Degraded", "Failed"),
    "out of restarts": ("Degraded", "Failed"),
    "suspended": ("Suspended", "Current"),
}


@pytest.mark.parametrize("state", CAPTURED_EXPECTED)
def test_argo_cd_and_kstatus_on_statuses_captured_from_real_queries(state):
    obj = json.loads(CAPTURED.read_text())[state]
    health, message = argo_health(obj)
    assert (health, kstatus(obj)) == CAPTURED_EXPECTED[state], message
    assert message
