"""The Service in front of the current driver's Spark UI, for ``spec.runtime.sparkUI`` (pure).

A query may have two driver pods (``spec.runtime.standby``): the Service selects the
query's drivers of one attempt, the current one (``status.attempt``), so the UI and
the metrics on port 4040 are those of the driver that runs the query, never the
standby's. When the attempt changes (a new driver, a standby promoted) the
Service's selector follows; its address is ``status.sparkUI``.

    follow   after every decision: create the Service or move its selector when the
             attempt changed, delete it when the UI was turned off
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from contract.names import SPARK_UI_PORT
from controller import names
from controller.decide.draft import ApplySparkUIService, Decision, DeleteSparkUIService, Event, Inputs
from controller.phases import Reason


def url(query: str, namespace: str) -> str:
    return f"http://{names.spark_ui_service_name(query)}.{namespace}.svc:{SPARK_UI_PORT}"


def wanted(raw_spec: Any) -> bool:
    """Read from the resource as it is (even a spec refused as invalid keeps or drops its UI as asked)."""
    runtime = (raw_spec or {}).get("runtime") if isinstance(raw_spec, dict) else None
    return isinstance(runtime, dict) and runtime.get("sparkUI") is True


def follow(inputs: Inputs, decision: Decision) -> Decision:
    """The decision, with the UI Service kept on the current attempt and status.sparkUI set."""
    old, status = inputs.status, decision.status
    if not wanted(inputs.raw_spec):
        if old.spark_ui is None:
            return decision
        status.spark_ui = None
        return replace(decision, actions=(*decision.actions, DeleteSparkUIService(inputs.name, inputs.namespace)))
    address = url(inputs.name, inputs.namespace)
    if status.attempt <= 0:  # no driver was ever made: nothing to point at yet
        return decision
    status.spark_ui = address
    if old.spark_ui == address and old.attempt == status.attempt:
        return decision  # made for this attempt already
    return replace(decision, actions=(*decision.actions, ApplySparkUIService(inputs.name, inputs.namespace, status.attempt)))


def name_taken(decision: Decision, message: str) -> Decision:
    """The UI Service's (or Ingress's) name is another object's, which the operator never takes
    over: the query runs on without a UI, and says why (an event each time it tries again)."""
    status = decision.status.model_copy(deep=True)
    status.spark_ui = None
    warning = Event("Warning", Reason.NAME_CONFLICT, f"no Spark UI: {message}")
    return replace(decision, status=status, events=(*decision.events, warning))
