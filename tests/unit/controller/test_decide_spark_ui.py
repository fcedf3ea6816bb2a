"""spec.runtime.sparkUI: one Service in front of the current driver's UI, following the attempt."""

from __future__ import annotations

import pytest

from contract.names import SPARK_UI_PORT
from controller import names, render
from controller.decide import ApplySparkUIService, DeleteSparkUIService
from controller.observe import DriverPhase
from tests.unit.controller.test_decide_standby import STANDBY
from tests.unit.controller.world import World, base_spec

pytestmark = pytest.mark.unit

UI = {"runtime.sparkUI": True}
URL = "http://q-ui.ns.svc:4040"


def ui_actions(decision) -> list:
    return [a for a in decision.actions if isinstance(a, ApplySparkUIService | DeleteSparkUIService)]


def test_off_by_default_no_service_and_no_address():
    w = World(base_spec())
    decisions = [w.reconcile()]
    w.driver_runs()
    decisions += w.settle()
    assert all(ui_actions(d) == [] for d in decisions) and w.status.spark_ui is None


def test_the_service_is_made_with_the_first_driver_then_left_alone():
    w = World(base_spec(**UI))
    d = w.reconcile()
    assert ui_actions(d) == [ApplySparkUIService("q", "ns", 1)] and d.status.spark_ui == URL
    w.driver_runs()
    assert all(ui_actions(d) == [] for d in w.settle())  # steady: no API write every pass
    assert w.status.dump()["sparkUI"] == URL


def test_a_restart_moves_the_selector_to_the_new_attempt():
    w = World(base_spec(**UI))
    w.reconcile()
    w.driver_runs()
    w.settle()
    w.driver_exits(70)
    applied = [a for d in w.settle(limit=20) for a in ui_actions(d)]
    if w.status.attempt == 1:  # in backoff: let it pass
        w.advance(600)
        applied += [a for d in w.settle(limit=20) for a in ui_actions(d)]
    assert w.status.attempt == 2 and applied == [ApplySparkUIService("q", "ns", 2)]


def test_the_standby_is_never_behind_the_service_until_it_takes_over():
    w = World(base_spec(**STANDBY, **UI))
    assert ui_actions(w.reconcile()) == [ApplySparkUIService("q", "ns", 1)]
    w.change("q-driver-1", phase=DriverPhase.RUNNING, started_at=w.now)
    w.reconcile()
    w.driver_reports(batchId=1)  # its query runs: now the standby
    d = w.reconcile()  # creates the standby, attempt 2: the Service stays on attempt 1
    assert d.status.standby == "q-driver-2" and ui_actions(d) == []
    w.change("q-driver-2", phase=DriverPhase.RUNNING, started_at=w.now)
    assert ui_actions(w.reconcile()) == []
    w.change("q-driver-1", phase=DriverPhase.FAILED, exit_code=70, message="boom", finished_at=w.now, reason="Error")
    d = w.reconcile()
    assert d.verb == "promote" and ui_actions(d) == [ApplySparkUIService("q", "ns", 2)]


def test_turning_it_off_deletes_the_service_and_clears_the_address():
    w = World(base_spec(**UI))
    w.reconcile()
    w.driver_runs()
    w.settle()
    w.edit(**{"runtime.sparkUI": False})
    d = w.reconcile()
    assert ui_actions(d) == [DeleteSparkUIService("q", "ns")] and d.status.spark_ui is None
    assert "sparkUI" not in d.status.dump()
    assert all(ui_actions(x) == [] for x in w.settle(limit=20))


def test_the_rendered_service_selects_one_attempt_of_the_query_drivers():
    svc = render.spark_ui_service("q", "ns", 3)
    assert svc["metadata"]["name"] == names.spark_ui_service_name("q") == "q-ui"
    assert svc["spec"]["selector"] == {"streamq.io/query": "q", "streamq.io/component": "driver",
                                       "app.kubernetes.io/managed-by": "streamq", "streamq.io/attempt": "3"}  # fmt: skip
    assert svc["spec"]["ports"] == [{"name": "spark-ui", "port": SPARK_UI_PORT, "targetPort": SPARK_UI_PORT}]


def test_the_driver_names_its_ui_port_only_when_asked():
    from contract.load import validate_spec
    from controller.config import Settings
    from controller.run import Run

    def ports(spec: dict) -> list:
        parsed = validate_spec(spec)
        run = Run(query="q", namespace="ns", attempt=1, spec=parsed, checkpoint_location=parsed.checkpoint.location)
        return render.driver_pod(run, Settings())["spec"]["containers"][0].get("ports", [])

    progress = {"name": "progress", "containerPort": 8090}  # every driver's (controller.progress_read)
    assert ports(base_spec()) == [progress]
    assert ports(base_spec(**UI)) == [progress, {"name": "spark-ui", "containerPort": SPARK_UI_PORT}]


def test_an_ingress_only_when_the_installation_names_a_host():
    from controller.config import Settings

    assert render.spark_ui_ingress("q", "ns", Settings()) is None
    ing = render.spark_ui_ingress("q", "ns", Settings(spark_ui_ingress_host="{query}.{namespace}.spark.example.com",
                                                      spark_ui_ingress_class="nginx"))  # fmt: skip
    assert ing["spec"]["ingressClassName"] == "nginx"
    (rule,) = ing["spec"]["rules"]
    assert rule["host"] == "q.ns.spark.example.com"
    assert rule["http"]["paths"][0]["backend"]["service"] == {"name": "q-ui", "port": {"number": SPARK_UI_PORT}}


def test_a_spec_without_the_field_keeps_its_driver_hash():
    """Unset is None, not False: drivers made before the field existed are not replaced on upgrade."""
    from contract.load import validate_spec
    from controller.run import run_fields

    assert "sparkUI" not in run_fields(validate_spec(base_spec()))["runtime"]
    assert run_fields(validate_spec(base_spec(**UI)))["runtime"]["sparkUI"] is True
