"""A driver waiting on the query's Lease starts no executors (app.pipeline.session.waiting_conf,
app.driver.executors): what Spark conf it gets, from the conf the operator renders."""

from __future__ import annotations

import pytest

from app.driver.warmup import WarmUp
from app.pipeline import session
from contract.load import load_document, validate_spec
from controller import render
from controller.config import Settings
from controller.run import Run
from testbed.specs import changed, query_spec

pytestmark = pytest.mark.unit

K8S = "k8s://https://kubernetes.default.svc:443"

HELD_BACK = {
    "local mode: the driver runs every task": ({"spark.master": "local[4]", "spark.executor.instances": "3"}, 0),
    "Kubernetes, 3 executors": ({"spark.master": K8S, "spark.executor.instances": "3"}, 3),
    "Kubernetes, the count unset: Spark's default 2": ({"spark.master": K8S}, 2),
    "Kubernetes, 0 executors": ({"spark.master": K8S, "spark.executor.instances": "0"}, 0),
    "Kubernetes, an unreadable count (Spark refuses it)": ({"spark.master": K8S, "spark.executor.instances": "x"}, 0),
    "no master": ({}, 0),
}


@pytest.mark.parametrize("case", sorted(HELD_BACK))
def test_what_a_waiting_driver_holds_back(case):
    conf, held = HELD_BACK[case]
    assert session.held_back(conf) == held
    waiting = session.waiting_conf(conf)
    assert waiting == ({**conf, "spark.executor.instances": "0"} if held else conf)
    assert session.held_back(waiting) == 0  # nothing left to start while it waits


PVC = {"persistentVolumeClaim": {"claimName": "streamq-checkpoints"}}


@pytest.mark.parametrize(("executors", "held"), [(0, 0), (1, 1), (4, 4)])
def test_a_standby_driver_of_the_operator_holds_back_its_executors(executors, held):
    """The conf the operator renders for a standby query's driver pod, read as its job reads it."""
    spec = validate_spec(changed(query_spec(), {"checkpoint.volume": PVC, "runtime.standby": True,
                                                "runtime.executors": {"instances": executors}}))  # fmt: skip
    run = Run(query="payments", namespace="team-a", attempt=2, spec=spec, checkpoint_location="/checkpoints/fraud",
                     standby=True)  # fmt: skip
    doc = load_document(render.query_document(run, Settings(job_image="streamq:9.9.9")))
    conf = session.spark_conf(doc.spec)
    assert session.held_back(conf) == held
    waiting = session.waiting_conf(conf)
    assert waiting.get("spark.executor.instances", "0") == "0"
    assert {k: v for k, v in waiting.items() if k != "spark.executor.instances"} == {
        k: v for k, v in conf.items() if k != "spark.executor.instances"
    }  # only the count changes: cores, memory, pod template and the rest are the running driver's


def test_a_warm_up_without_executors_says_its_tasks_wait():
    text = WarmUp(4.2, submitted=True).describe()
    assert "first job submitted" in text and "holds the Lease" in text
    assert "gave up" in WarmUp(120.0).describe()
