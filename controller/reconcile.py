"""One reconcile pass for one query: observe -> decide -> act -> status (I/O).

Everything that can be decided without Kubernetes is in ``decide``; this module
only fetches the inputs (``observe``), has the decision carried out (``act``:
children first, so a retry finds them by name) and writes the status last,
guarded by the resourceVersion it was decided on. Acting decides nothing: it
returns what came of the actions (``ActOutcome``: a creation the API refused and
why, UI names taken, resizes). When that is not simply "as decided", the outcome
goes into the inputs (``Inputs.acted``) and ``decide`` runs again, from the top;
the status written is that second decision's. It carries no actions, so a pass
acts once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from kubernetes.client.exceptions import ApiException

from contract import credentials
from contract.spec import Backend
from controller.act import Log, act
from controller.config import Settings
from controller.decide import Decision, Inputs, Verb, decide, parse_spec, upgrade
from controller.kube import Kube, api_message
from controller.observe import observe
from controller.phases import Phase
from controller.progress_read import ProgressRead, read_progress
from controller.run import SPARK_APP_KIND
from controller.status import QueryStatus, status_patch


@dataclass(frozen=True)
class Seen:
    """What a pass read and wrote: the inputs it decided on, the resource with the status it wrote (its
    resourceVersion the write's). A progress-only pass decides from it, with a new record and a new time."""

    inputs: Inputs
    body: dict[str, Any]


@dataclass(frozen=True)
class Outcome:
    decision: Decision
    body: dict[str, Any]  # the resource as read (for events)
    conflict: bool = False  # the status write lost a race: look again at once
    progress: ProgressRead | None = None  # how this pass read the driver's progress, if it did
    seen: Seen | None = None  # what the next pass may decide from, when nothing woke it in between


def expected_after_write(body: dict[str, Any], status: dict[str, Any]) -> tuple[Any, ...]:
    """What a query looks like once its status is written and nothing else changed (handlers.query_changed)."""
    meta = body.get("metadata") or {}
    return (meta.get("generation"), meta.get("annotations") or {}, meta.get("labels") or {}, status)


def _uses_spark_apps(spec: Any, status: QueryStatus) -> bool:
    backend = ((spec or {}).get("runtime") or {}).get("backend") if isinstance(spec, dict) else None
    return backend == Backend.SPARK_APPLICATION or status.driver_kind == SPARK_APP_KIND


def reconcile_once(
    kube: Kube,
    settings: Settings,
    namespace: str,
    name: str,
    *,
    with_progress: bool = False,
    logger: Log | None = None,
    now: datetime | None = None,
) -> Outcome | None:
    """Returns None when the query is gone or being deleted (its children go with it)."""
    log = logger or logging.getLogger("streamq.controller")
    body = kube.get_query(namespace, name)
    if body is None or body["metadata"].get("deletionTimestamp"):
        return None
    meta = body["metadata"]
    raw_status = body.get("status") or {}
    status = QueryStatus.parse(raw_status)
    observed = observe(kube, namespace, name, _uses_spark_apps(body.get("spec"), status),
                       secrets=credentials.secret_names(body.get("spec")))  # fmt: skip
    progress: ProgressRead | None = None
    handing_over = status.upgrade is not None and status.upgrade.state == upgrade.HANDING_OVER
    if (with_progress or handing_over) and status.phase in (
        Phase.RUNNING,
        Phase.UPGRADING,
    ):  # handing over: is the new one serving?
        progress = read_progress(kube, namespace, status, observed.drivers, log)
    inputs = Inputs(
        name=name,
        namespace=namespace,
        uid=meta["uid"],
        generation=int(meta.get("generation") or 0),
        raw_spec=body.get("spec"),
        status=status,
        drivers=observed.drivers,
        now=now or datetime.now(UTC),
        progress=progress.record if progress is not None else None,
        progress_read=progress is not None,
        progress_refused=progress.refused if progress is not None else None,
        silent_after_s=settings.silent_after_s,
        policy=settings.policy,
        facts=settings.facts,
        lease=observed.lease,
        secrets=observed.secrets,
    )
    inputs = replace(inputs, desired=parse_spec(inputs))  # once a pass; a progress-only pass keeps it
    decision = decide(inputs)
    acted = act(kube, settings, body, inputs, decision, log)
    if not acted.as_decided:  # a refusal is an input of the next decision, taken in this pass
        decision = decide(replace(inputs, acted=acted))
    return _write_status(kube, namespace, name, body, inputs, decision, progress, log)


def progress_pass(kube: Kube, seen: Seen, *, logger: Log | None = None, now: datetime | None = None) -> Outcome | None:
    """A pass that reads only the running driver's progress: nothing but time and the record changed
    since ``seen`` (nothing woke the reconciler: no event of the query, its drivers, or their pods), so
    the same inputs with the new record decide, and only the status is written. The write is guarded by
    the resourceVersion of the last one: any other write since (which would have woken the reconciler)
    is a conflict, and a full pass follows at once. Returns None when the decision is more than a
    status (an action, an event): that takes a full pass, which reads everything afresh."""
    log = logger or logging.getLogger("streamq.controller")
    inputs = seen.inputs
    status = QueryStatus.parse(seen.body.get("status") or {})
    if status.phase is not Phase.RUNNING:
        return None
    progress = read_progress(kube, inputs.namespace, status, inputs.drivers, log)
    inputs = replace(inputs, status=status, now=now or datetime.now(UTC), progress=progress.record,
                     progress_read=True, progress_refused=progress.refused)  # fmt: skip
    decision = decide(inputs)
    if decision.actions or decision.events or decision.verb is not Verb.RUNNING:
        return None
    return _write_status(kube, inputs.namespace, inputs.name, seen.body, inputs, decision, progress, log)


def _write_status(kube: Kube, namespace: str, name: str, body: dict[str, Any], inputs: Inputs, decision: Decision,
                  progress: ProgressRead | None, log: Log) -> Outcome:  # fmt: skip
    """Writes the decided status over the one ``body`` has, guarded by its resourceVersion."""
    raw_status = body.get("status") or {}
    new_status = decision.status.dump()
    patch = status_patch(raw_status, new_status)
    if not patch:
        return Outcome(decision, body, progress=progress, seen=Seen(inputs, body))
    kube.status_expected[namespace, name] = expected_after_write(body, new_status)
    try:
        written = kube.patch_query_status(namespace, name, patch, body["metadata"].get("resourceVersion"))
    except ApiException as exc:
        if exc.status in (404, 409):  # deleted, or changed since we read it: decide again
            log.debug("status write skipped (%s): %s", exc.status, api_message(exc))
            return Outcome(decision, body, conflict=exc.status == 409, progress=progress)
        raise
    return Outcome(decision, body, progress=progress, seen=Seen(inputs, written))
