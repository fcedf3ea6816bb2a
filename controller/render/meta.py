"""The metadata every child of one run carries (pure): its name, namespace and labels, and
on the objects that are (or configure) the driver, what the driver runs."""

from __future__ import annotations

from typing import Any

from controller import names
from controller.run import Run, spec_hash


def meta(name: str, run: Run, component: str, attempt: int | None = None, **extra: Any) -> dict[str, Any]:
    out = {"name": name, "namespace": run.namespace, "labels": names.labels(run.query, component, attempt)}
    out.update(extra)
    return out


def child(api_version: str, kind: str, name: str, run: Run, component: str, **fields: Any) -> dict[str, Any]:
    """An object of the run's query that is not the driver: its ``fields`` (spec, data, rules...) after the metadata."""
    return {"apiVersion": api_version, "kind": kind, "metadata": meta(name, run, component), **fields}


def run_annotations(run: Run) -> dict[str, str]:
    """What observe reads back from a driver to tell whether it still runs the spec (a new hash: a new driver)."""
    return {
        names.ANNOTATION_SPEC_HASH: spec_hash(run.spec, run.checkpoint_location),
        names.ANNOTATION_CHECKPOINT: run.checkpoint_location,
        names.ANNOTATION_RESTART_NONCE: run.spec.restart_nonce or "",
    }
