"""The ConfigMap the driver reads its query from (pure): the StreamingQuery document
(key query.json) and, when it starts executors, their pod template."""

from __future__ import annotations

import json
from typing import Any

from contract import API_VERSION, HANDOVER_ANNOTATION, KIND, RESUME_ANNOTATION, SPEC_FILE_NAME
from contract.spec import Backend
from controller import names
from controller.config import Settings
from controller.render.executors import EXECUTOR_TEMPLATE_FILE, executor_conf, executor_pod_template
from controller.render.meta import meta, run_annotations
from controller.render.units import driver_heap
from controller.run import Run


def _annotations(run: Run) -> dict[str, str]:
    annotations = {}
    if run.resume is not None:
        annotations[RESUME_ANNOTATION] = run.resume.to_annotation()
    if run.handover_from is not None:
        annotations[HANDOVER_ANNOTATION] = run.handover_from
    return annotations


def query_document(run: Run, settings: Settings) -> dict[str, Any]:
    """The StreamingQuery the job runs: the spec with the effective checkpoint location
    and the Spark settings the operator adds (the user's sparkConf wins)."""
    spec = run.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    spec.pop("suspend", None)
    spec["checkpoint"]["location"] = run.checkpoint_location
    runtime = spec.setdefault("runtime", {})
    conf = executor_conf(run, settings)
    if run.spec.runtime.backend is Backend.POD:
        conf.setdefault("spark.driver.memory", driver_heap(run.spec.runtime.driver.memory))
    conf.update(runtime.get("sparkConf", {}))
    if conf:
        runtime["sparkConf"] = conf
    metadata: dict[str, Any] = {"name": run.query, "namespace": run.namespace}
    annotations = _annotations(run)
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}


def _as_file(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def config_map(run: Run, settings: Settings) -> dict[str, Any]:
    data = {SPEC_FILE_NAME: _as_file(query_document(run, settings))}
    if run.uses_executors:
        data[EXECUTOR_TEMPLATE_FILE] = _as_file(executor_pod_template(settings, run))
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(names.config_map_name(run.query), run, names.COMPONENT_QUERY_CONFIG, annotations=run_annotations(run)),
        "data": data,
    }
