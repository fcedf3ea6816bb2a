"""A query's placement and metadata as pod fields (pure): what ``spec.runtime.driver`` and
``spec.runtime.executors`` say of nodeSelector, tolerations, affinity, priorityClassName,
labels and annotations, merged with what the operator puts on the same pods itself.

The policy has refused every key the operator or Spark selects pods by
(``contract.placement``); the operator's own labels and annotations are still applied
last, so a spec checked by no policy (``streamq run``) cannot replace them either.
"""

import copy
from typing import Any

from contract.spec import PodPlacement


def _dumped(value: Any) -> Any:
    return [_dumped(v) for v in value] if isinstance(value, list) else value.model_dump(
        mode="json", by_alias=True, exclude_none=True)  # fmt: skip


def tolerations(pod: PodPlacement, operator: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The operator's tolerations, then the spec's."""
    return [*(operator or []), *_dumped(pod.tolerations or [])]


def affinity(pod: PodPlacement, operator: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The spec's affinity with the operator's terms added to it (a standby query's preferred
    anti-affinity between its drivers): both hold, neither replaces the other."""
    out = _dumped(pod.affinity) if pod.affinity is not None else {}
    for kind, rules in (operator or {}).items():
        merged = out.setdefault(kind, {})
        for when, terms in rules.items():
            merged.setdefault(when, []).extend(copy.deepcopy(terms))
    return out or None


def scheduling(
    pod: PodPlacement, operator_tolerations: list[dict[str, Any]] | None = None, operator_affinity: dict[str, Any] | None = None
) -> dict[str, Any]:
    """nodeSelector, tolerations, affinity and priorityClassName, as a pod's spec (or a
    SparkApplication's driver and executor) names them; only those that are set."""
    out: dict[str, Any] = {}
    if pod.node_selector:
        out["nodeSelector"] = dict(pod.node_selector)
    found = tolerations(pod, operator_tolerations)
    if found:
        out["tolerations"] = found
    merged = affinity(pod, operator_affinity)
    if merged is not None:
        out["affinity"] = merged
    if pod.priority_class_name:
        out["priorityClassName"] = pod.priority_class_name
    return out


def labels(pod: PodPlacement, operator: dict[str, str]) -> dict[str, str]:
    """The spec's labels, then the operator's (which win)."""
    return {**(pod.labels or {}), **operator}


def annotations(pod: PodPlacement, operator: dict[str, str] | None = None) -> dict[str, str]:
    """The spec's annotations, then the operator's (which win)."""
    return {**(pod.annotations or {}), **(operator or {})}
