"""The next step for one query, from what is desired and what exists (pure).

``decide(inputs)`` reads the resource (spec, generation, status) and the
observed drivers at time ``now`` and returns a :class:`Decision`: the status to
write, the drivers to create or delete, the events to post and when to look
again. It never talks to Kubernetes, so every transition is a table-driven
unit test.

The rules, in order:

1. A spec the static rules refuse is ``Invalid``: its driver is stopped.
2. A change the checkpoint cannot take (app.compat: the source's kind, topics or
   pattern; state the new spec would not keep, as the job reported the checkpoint
   holds) is refused (the previous spec keeps running) unless the checkpoint
   location changed too, or ``onIncompatibleChange: newCheckpoint`` asks for a fresh one.
3. ``Failed``, ``Invalid`` and ``Completed`` stay until the spec changes.
4. ``suspend`` deletes the driver and keeps the checkpoint.
5. Never two drivers for one checkpoint: nothing is created while any other
   driver of the query still exists, even one that is terminating.
6. A driver that runs an outdated spec (a spec change, a new restartNonce) is
   replaced at once; a driver that ended is classified by its exit code:
   64/65 mean ``Invalid`` (not retried); anything else is restarted under the
   restart policy with exponential backoff until ``maxRestarts`` (75: the job found
   its query stalled, reason ``Stalled``; 76: the source outgrew its task slots).
7. Running ``stableAfter`` resets the restart counter.
8. What the running driver reports (``Inputs.progress``) goes into status.progress;
   a stall it reports makes ``Degraded`` ``Stalled``; a checkpoint it had to start
   afresh is said in an event. The next driver gets the last committed offsets, for
   the case its checkpoint is gone (app.resume).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from app.contract.compat import Holds, checkpoint_differences, fresh_checkpoint_location, refusal, spec_differences
from app.contract import ExitCode
from app.contract.resume import ResumeFrom
from app.contract.load import validate_spec
from app.contract.spec import IncompatibleChange, QuerySpec, RestartType, duration_ms
from app.contract.problems import SpecError
from controller import progress as reports
from controller import render
from controller.observe import Driver, DriverPhase
from controller.phases import ConditionType, Phase, Reason
from controller.status import CheckpointStatus, Condition, Failure, QueryStatus, format_time, parse_time

WAIT_FOR_DELETION_S = 5.0  # pod events wake the reconciler sooner; this is a safety net


@dataclass(frozen=True)
class Inputs:
    name: str
    namespace: str
    uid: str
    generation: int
    raw_spec: Any
    status: QueryStatus
    drivers: tuple[Driver, ...]
    now: datetime
    progress: dict[str, Any] | None = None  # the driver's newest progress record, if read this pass
    silent_after_s: float = 120.0  # a newest record older than this: Unresponsive


@dataclass(frozen=True)
class CreateDriver:
    run: render.Run


@dataclass(frozen=True)
class DeleteDriver:
    kind: str
    name: str
    reason: str


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True)
class Decision:
    verb: str  # what happened, in one word (tests and metrics): create, delete, wait, backoff, ...
    status: QueryStatus
    actions: tuple[CreateDriver | DeleteDriver, ...] = ()
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None  # seconds until the next look, if time alone changes things
    restarted: bool = False  # a failure was counted as a restart


# --- helpers ------------------------------------------------------------------------


def backoff_delay(restart: int, initial: str, maximum: str) -> float:
    """Seconds before the n-th restart (1-based): initial, 2x, 4x, ... capped at maximum."""
    first, cap = duration_ms(initial), duration_ms(maximum)
    return min(first * 2 ** max(0, restart - 1), cap) / 1000.0


def dump_spec(spec: QuerySpec) -> str:
    return json.dumps(spec.model_dump(mode="json", by_alias=True, exclude_none=True), sort_keys=True)


def load_last_spec(text: str | None) -> QuerySpec | None:
    if not text:
        return None
    try:
        return QuerySpec.model_validate_json(text)
    except ValueError:
        return None  # written by an older model: treated as unknown


def _failure_text(d: Driver) -> str:
    parts = []
    if d.exit_code is not None:
        try:
            parts.append(f"exit {d.exit_code} ({ExitCode(d.exit_code).name})")
        except ValueError:
            parts.append(f"exit {d.exit_code}")
    if d.reason and d.reason not in ("Error", "Completed"):
        parts.append(d.reason)
    head = ", ".join(parts) or "ended"
    return f"{head}: {d.message}" if d.message else head


# --- the builder: one decision, step by step -------------------------------------------


@dataclass
class _Draft:
    inputs: Inputs
    status: QueryStatus
    reason: str | None = None  # None: keep the reason the conditions have
    refusal: str | None = None
    stall: str | None = None  # the running driver reports a stall
    silence: str | None = None  # the running driver stopped reporting
    actions: list = field(default_factory=list)
    events: list = field(default_factory=list)
    requeue: list = field(default_factory=list)
    restarted: bool = False

    @property
    def old(self) -> QueryStatus:
        return self.inputs.status

    def event(self, type_: str, reason: str, message: str) -> None:
        self.events.append(Event(type_, reason, message))

    def delete(self, d: Driver, reason: str) -> None:
        if not d.deleting:
            self.actions.append(DeleteDriver(d.kind, d.name, reason))

    def wait(self, seconds: float) -> None:
        self.requeue.append(max(0.0, seconds))

    def phase(self, phase: Phase, reason: str, message: str) -> None:
        self.status.phase, self.reason, self.status.message = phase, reason, message

    def finish(self, verb: str) -> Decision:
        self.status.conditions = _conditions(self)
        return Decision(
            verb=verb,
            status=self.status,
            actions=tuple(self.actions),
            events=tuple(self.events),
            requeue_after=min(self.requeue) if self.requeue else None,
            restarted=self.restarted,
        )


def _conditions(d: _Draft) -> list[Condition]:
    st, now, gen = d.status, format_time(d.inputs.now), d.inputs.generation
    phase = st.phase or Phase.PENDING
    message = st.message or ""
    kept = d.old.condition(ConditionType.READY)
    reason = d.reason or (kept.reason if kept is not None else Reason.AS_EXPECTED)
    ready = phase is Phase.RUNNING
    progressing = phase in (Phase.PENDING, Phase.STARTING, Phase.RESTARTING)
    degraded_reason: str | None = None
    degraded_message = ""
    if d.refusal is not None:
        degraded_reason, degraded_message = Reason.INCOMPATIBLE_CHANGE, d.refusal
    elif d.stall is not None:
        degraded_reason, degraded_message = Reason.STALLED, d.stall
    elif d.silence is not None:
        degraded_reason, degraded_message = Reason.UNRESPONSIVE, d.silence
    elif phase in (Phase.FAILED, Phase.INVALID) or reason == Reason.DRIVER_CREATE_FAILED:
        degraded_reason, degraded_message = reason, message
    elif phase is Phase.RESTARTING and reason in (Reason.DRIVER_FAILED, Reason.DRIVER_LOST, Reason.DRIVER_EXITED, Reason.STALLED):
        degraded_reason, degraded_message = reason, message
    wanted = [
        (ConditionType.READY, ready, reason, message),
        (ConditionType.PROGRESSING, progressing, reason, message),
        (
            ConditionType.DEGRADED,
            degraded_reason is not None,
            degraded_reason or Reason.AS_EXPECTED,
            degraded_message,
        ),
    ]
    out = []
    for kind, value, reason, text in wanted:
        status = "True" if value else "False"
        previous = d.old.condition(kind)
        changed = previous is None or previous.status != status
        out.append(
            Condition(
                type=kind,
                status=status,
                reason=str(reason),
                message=text,
                last_transition_time=now if changed else previous.last_transition_time,
                observed_generation=gen,
            )
        )
    return out


# --- decide ----------------------------------------------------------------------------


def decide(inputs: Inputs) -> Decision:
    d = _Draft(inputs=inputs, status=inputs.status.model_copy(deep=True))
    d.status.observed_generation = inputs.generation
    old = inputs.status

    try:
        desired = validate_spec(inputs.raw_spec)
    except SpecError as exc:
        return _invalid_spec(d, exc)

    mine = [x for x in inputs.drivers if x.owner_uid == inputs.uid]
    strangers = [x for x in inputs.drivers if x.owner_uid != inputs.uid]
    for x in strangers:  # left by an earlier StreamingQuery of the same name
        d.delete(x, "not owned by this StreamingQuery")

    if inputs.progress is not None:  # what the current driver reported; kept while no newer comes
        d.status.progress = {**inputs.progress, "attempt": old.attempt}

    # 2. the checkpoint gate
    last = load_last_spec(old.last_reconciled_spec)
    run_spec = desired
    incompatible = _incompatibility(last, desired, old.checkpoint, d.status.progress)
    if incompatible and desired.checkpoint.on_incompatible_change is IncompatibleChange.REFUSE:
        d.refusal = refusal(incompatible, last.checkpoint.location) + " The previous spec keeps running."
        run_spec = last.model_copy(update={"suspend": desired.suspend})
        previous = old.condition(ConditionType.DEGRADED)
        if previous is None or previous.reason != Reason.INCOMPATIBLE_CHANGE or previous.message != d.refusal:
            d.event("Warning", Reason.INCOMPATIBLE_CHANGE, d.refusal)
        incompatible = None
    checkpoint = _effective_checkpoint(desired, last, old.checkpoint, fresh=incompatible is not None)
    run_hash = render.spec_hash(run_spec, checkpoint.location)
    d.status.mode = run_spec.mode

    # the current driver: the newest of ours; older ones must go
    attempt = max([old.attempt, *[x.attempt or 0 for x in mine]])
    current = next((x for x in mine if (x.attempt or 0) == attempt and attempt > 0), None)
    for x in mine:
        if x is not current:
            d.delete(x, "superseded by a newer attempt")
    blockers = [x for x in inputs.drivers if x is not current]
    if current is not None and old.attempt < attempt:  # created, but the status write was lost
        d.status.attempt, d.status.driver, d.status.driver_kind = attempt, current.name, current.kind
        if current.spec_hash == run_hash:
            d.status.last_reconciled_spec = dump_spec(run_spec)
            d.status.checkpoint = checkpoint

    # 3. terminal phases stay until the spec changes
    if old.phase is not None and old.phase.terminal:
        if old.observed_generation == inputs.generation:
            if current is not None and current.active:
                d.delete(current, f"the query is {old.phase}")
            return d.finish("nothing")
        d.status.restarts, d.status.next_restart_time = 0, None
        d.event("Normal", Reason.SPEC_CHANGED, f"spec changed (generation {inputs.generation}): starting again")
        if current is not None:
            d.delete(current, "spec changed after the query ended")
            d.phase(Phase.RESTARTING, Reason.SPEC_CHANGED, f"spec changed: replacing driver {current.name}")
            d.wait(WAIT_FOR_DELETION_S)
            return d.finish("delete")
        d.status.phase = Phase.PENDING

    # 4. suspend
    if run_spec.suspend:
        return _suspend(d, current)

    # 5. no driver: create one, unless another still exists or a backoff runs
    if current is None:
        return _no_driver(d, inputs, run_spec, checkpoint, attempt, blockers)
    if current.deleting:
        d.wait(WAIT_FOR_DELETION_S)
        if d.status.phase is None:
            d.phase(Phase.PENDING, Reason.WAITING_FOR_OLD_DRIVER, f"waiting for driver {current.name} to terminate")
        return d.finish("wait")

    # 6. a driver exists
    if current.spec_hash != run_hash:
        return _replace_outdated(d, current, last, run_spec, checkpoint.location)
    if current.phase is DriverPhase.RUNNING:
        return _running(d, current, run_spec)
    if current.phase is DriverPhase.UNKNOWN:  # its node stopped reporting: wait for news, change nothing
        d.status.message = f"the state of driver {current.name} is unknown (is its node reachable?)"
        return d.finish("wait")
    if current.active:
        message = f"driver {current.name} is starting" + (f" ({current.waiting})" if current.waiting else "")
        if old.phase is not Phase.STARTING:
            d.phase(Phase.STARTING, Reason.DRIVER_STARTING, message)
        elif current.waiting:
            d.status.message = message  # e.g. ErrImagePull: say so while it lasts
        return d.finish("wait")
    return _ended(d, current, run_spec)



def _incompatibility(last: QuerySpec | None, desired: QuerySpec, current: CheckpointStatus | None,
                     progress: dict[str, Any] | None) -> str | None:  # fmt: skip
    """The first reason the desired spec cannot run on the current checkpoint: from the spec it
    was written with, else from what the job reported the checkpoint holds."""
    if last is None or desired.checkpoint.location != last.checkpoint.location:
        return None
    found = spec_differences(last, desired)
    if not found and current is not None and render.run_fields(last) != render.run_fields(desired):
        holds = Holds.from_json((progress or {}).get("checkpointHolds"))
        if holds is not None and (progress or {}).get("checkpoint") == current.location:
            found = checkpoint_differences(holds, desired)
    return found[0] if found else None


def _effective_checkpoint(
    desired: QuerySpec, last: QuerySpec | None, current: CheckpointStatus | None, fresh: bool
) -> CheckpointStatus:
    location = desired.checkpoint.location
    if last is None or current is None or last.checkpoint.location != location:
        return CheckpointStatus(location=location, resets=0)
    if fresh:
        resets = current.resets + 1
        return CheckpointStatus(location=fresh_checkpoint_location(location, resets), resets=resets)
    return current


def _invalid_spec(d: _Draft, exc: SpecError) -> Decision:
    message = "invalid spec: " + "; ".join(str(p) for p in exc.problems)
    old = d.old
    for x in d.inputs.drivers:
        d.delete(x, "the spec is invalid")
    if old.phase is not Phase.INVALID or old.message != message:
        d.event("Warning", Reason.INVALID_SPEC, message)
    d.status.next_restart_time = None
    d.phase(Phase.INVALID, Reason.INVALID_SPEC, message)
    return d.finish("invalid")


def _suspend(d: _Draft, current: Driver | None) -> Decision:
    d.status.next_restart_time = None
    d.status.driver_start_time = None
    if current is not None and not current.deleting:
        d.delete(current, "suspended")
    waiting = current is not None
    message = f"suspending: stopping driver {current.name}" if waiting else "suspended: no driver runs; the checkpoint is kept"
    if d.old.phase is not Phase.SUSPENDED:
        d.event("Normal", Reason.SUSPENDED, "suspend: true, stopping the query (the checkpoint is kept)")
    d.phase(Phase.SUSPENDED, Reason.SUSPENDED, message)
    if waiting:
        d.wait(WAIT_FOR_DELETION_S)
    return d.finish("suspend")


def _no_driver(d: _Draft, inputs: Inputs, run_spec: QuerySpec, checkpoint: CheckpointStatus, attempt: int,
               blockers: list[Driver]) -> Decision:  # fmt: skip
    old, now = d.old, inputs.now
    if blockers:
        names_ = ", ".join(x.name for x in blockers)
        if d.status.phase is None:
            d.status.phase = Phase.PENDING
        d.reason = Reason.WAITING_FOR_OLD_DRIVER
        d.status.message = f"waiting for {names_} to be deleted before starting a driver"
        d.wait(WAIT_FOR_DELETION_S)
        return d.finish("wait")
    lost = (
        old.phase in (Phase.STARTING, Phase.RUNNING)
        and old.attempt > 0
        and not (old.last_failure and old.last_failure.attempt == old.attempt)
    )
    if lost:
        gone = Driver(kind=old.driver_kind or "Pod", name=old.driver or "?", phase=DriverPhase.FAILED, attempt=old.attempt,
                      reason=Reason.DRIVER_LOST, message="the driver disappeared (deleted or evicted)")  # fmt: skip
        return _failed(d, gone, run_spec, reason=Reason.DRIVER_LOST)
    next_at = parse_time(old.next_restart_time)
    if old.phase is Phase.RESTARTING and next_at is not None and now < next_at:
        d.wait((next_at - now).total_seconds())
        return d.finish("backoff")
    return _create(d, inputs, run_spec, checkpoint, attempt + 1)


def _create(d: _Draft, inputs: Inputs, run_spec: QuerySpec, checkpoint: CheckpointStatus, attempt: int) -> Decision:
    old = d.old
    resume = ResumeFrom.from_progress(d.status.progress, checkpoint.location)
    run = render.Run(query=inputs.name, namespace=inputs.namespace, attempt=attempt, spec=run_spec,
                     checkpoint_location=checkpoint.location, resume=resume)  # fmt: skip
    kind = "SparkApplication" if run_spec.runtime.backend.value == "sparkApplication" else "Pod"
    d.actions.append(CreateDriver(run))
    st = d.status
    st.attempt, st.driver, st.driver_kind = attempt, run.driver_name, kind
    st.driver_start_time, st.next_restart_time = None, None
    st.last_reconciled_spec = dump_spec(run_spec)
    if old.checkpoint is not None and checkpoint.resets > old.checkpoint.resets:
        d.event("Normal", Reason.NEW_CHECKPOINT, f"the source changed: starting on a fresh checkpoint at {checkpoint.location}")
    st.checkpoint = checkpoint
    if old.phase is Phase.SUSPENDED:
        d.event("Normal", Reason.RESUMED, f"suspend: false, starting driver {run.driver_name}")
    what = "restarting" if old.phase is Phase.RESTARTING else "starting"
    d.event("Normal", Reason.CREATED, f"{what} the query: created {kind.lower() if kind == 'Pod' else kind} {run.driver_name} (attempt {attempt})")
    d.phase(Phase.STARTING, Reason.CREATED, f"driver {run.driver_name} created (attempt {attempt})")
    return d.finish("create")


def _only_the_nonce_changed(current: Driver, last: QuerySpec | None, run_spec: QuerySpec, location: str) -> bool:
    """Whether the driver differs from the spec in restartNonce alone. The driver's own record
    (its nonce and hash) answers even when the status write after its creation was lost; the
    last reconciled spec answers for drivers made before the nonce was recorded."""
    if current.restart_nonce is not None:
        with_its_nonce = run_spec.model_copy(update={"restart_nonce": current.restart_nonce or None})
        return current.restart_nonce != (run_spec.restart_nonce or "") and (
            render.spec_hash(with_its_nonce, location) == current.spec_hash
        )
    return (
        last is not None
        and last.restart_nonce != run_spec.restart_nonce
        and render.run_fields(last.model_copy(update={"restart_nonce": None}))
        == render.run_fields(run_spec.model_copy(update={"restart_nonce": None}))
    )


def _replace_outdated(
    d: _Draft, current: Driver, last: QuerySpec | None, run_spec: QuerySpec, location: str
) -> Decision:
    nonce_only = _only_the_nonce_changed(current, last, run_spec, location)
    reason = Reason.RESTART_REQUESTED if nonce_only else Reason.SPEC_CHANGED
    why = "restartNonce changed" if nonce_only else "the spec changed"
    d.delete(current, why)
    d.status.next_restart_time = None
    d.event("Normal", reason, f"{why}: stopping driver {current.name}; the query restarts on its checkpoint")
    d.phase(Phase.RESTARTING, reason, f"{why}: replacing driver {current.name}")
    d.wait(WAIT_FOR_DELETION_S)
    return d.finish("delete")


def _running(d: _Draft, current: Driver, run_spec: QuerySpec) -> Decision:
    old, now = d.old, d.inputs.now
    started = current.started_at or parse_time(old.driver_start_time) or now
    d.status.driver_start_time = format_time(started)
    if old.phase is not Phase.RUNNING:
        d.event("Normal", Reason.DRIVER_RUNNING, f"driver {current.name} is running")
    d.phase(Phase.RUNNING, Reason.DRIVER_RUNNING, f"driver {current.name} is running")
    _reported(d, current)
    if old.restarts > 0:
        stable_for = timedelta(milliseconds=duration_ms(run_spec.restart_policy.stable_after))
        if now - started >= stable_for:
            d.status.restarts = 0
            d.event("Normal", Reason.STABLE, f"running for {run_spec.restart_policy.stable_after}: restart counter reset")
        else:
            d.wait((started + stable_for - now).total_seconds())
    return d.finish("running")


def _reported(d: _Draft, current: Driver) -> None:
    """What the running driver said about itself: a stall, a checkpoint it had to start afresh."""
    attempt = current.attempt or d.status.attempt
    d.stall = reports.stalled(d.status.progress, attempt)
    if d.stall is not None:
        previous = d.old.condition(ConditionType.DEGRADED)
        if previous is None or previous.reason != Reason.STALLED or previous.status != "True":
            d.event("Warning", Reason.STALLED, f"driver {current.name}: {d.stall}")
    d.silence = _silence(d, current, attempt)
    found = reports.recovered(d.status.progress, attempt)
    if found is not None and reports.recovered(d.old.progress, attempt) is None:
        location = d.status.checkpoint.location if d.status.checkpoint else "?"
        batch = f" committed at batch {found['batchId']}" if found.get("batchId") is not None else ""
        d.event("Warning", Reason.CHECKPOINT_LOST,
                f"the checkpoint at {location} was {found.get('reason', 'missing')}: driver {current.name} started a fresh "
                f"one from the offsets{batch} recorded in status (nothing skipped): {found.get('startingOffsets')}")  # fmt: skip


def _silence(d: _Draft, current: Driver, attempt: int) -> str | None:
    """A driver that printed nothing for a while may be hung (a JVM in a GC spiral, a
    stuck call): reported, not acted on. Judged only on a fresh read of its log, where
    the newest record in the tail is the newest it printed; between reads the last
    judgement stands, so the condition does not flap."""
    previous = d.old.condition(ConditionType.DEGRADED)
    was_silent = previous is not None and previous.status == "True" and previous.reason == Reason.UNRESPONSIVE
    if d.inputs.progress is None:
        return previous.message if was_silent else None
    age = reports.report_age(d.status.progress, attempt, d.inputs.now)
    if age is None or age <= d.inputs.silent_after_s:
        if was_silent:
            d.event("Normal", Reason.DRIVER_RUNNING, f"driver {current.name} reports progress again")
        return None
    message = (f"driver {current.name} has printed no progress for {age:.0f}s (limit {d.inputs.silent_after_s:g}s; "
               f"the job reports every 10s): it may be hung, see `kubectl logs {current.name}`")  # fmt: skip
    if not was_silent:
        d.event("Warning", Reason.UNRESPONSIVE, message)
    return message


def _ended(d: _Draft, current: Driver, run_spec: QuerySpec) -> Decision:
    old, now = d.old, d.inputs.now
    if old.last_failure is not None and old.last_failure.attempt == current.attempt and old.phase is Phase.RESTARTING:
        next_at = parse_time(old.next_restart_time) or now
        if now >= next_at:
            d.delete(current, "backoff elapsed: making room for the next driver")
            d.wait(WAIT_FOR_DELETION_S)
            return d.finish("delete")
        d.wait((next_at - now).total_seconds())
        return d.finish("backoff")
    policy = run_spec.restart_policy.type
    if current.phase is DriverPhase.SUCCEEDED or current.exit_code == ExitCode.OK:
        if not run_spec.mode.restarts_when_done or policy is not RestartType.ALWAYS:
            d.status.driver_start_time = None
            d.event("Normal", Reason.COMPLETED, f"driver {current.name} finished: {current.message or 'exit 0'}")
            d.phase(Phase.COMPLETED, Reason.COMPLETED, f"the query finished (driver {current.name} exited 0)")
            return d.finish("complete")
        return _failed(d, current, run_spec, reason=Reason.DRIVER_EXITED)
    if current.exit_code in (ExitCode.INVALID_SPEC, ExitCode.QUERY_REFUSED):
        reason = Reason.INVALID_SPEC if current.exit_code == ExitCode.INVALID_SPEC else Reason.QUERY_REFUSED
        text = _failure_text(current)
        d.status.last_failure = _failure_record(current, reason, now)
        d.status.driver_start_time = None
        d.event("Warning", reason, f"driver {current.name} refused the query, not retrying: {text}")
        d.phase(Phase.INVALID, reason, f"the query cannot run (fix the spec): {text}")
        return d.finish("invalid")
    reason = {
        ExitCode.STALLED: Reason.STALLED,
        ExitCode.PARTITIONS_CHANGED: Reason.PARTITIONS_CHANGED,
        ExitCode.CHECKPOINT_UNWRITABLE: Reason.CHECKPOINT_UNWRITABLE,
    }.get(current.exit_code, Reason.DRIVER_FAILED)
    return _failed(d, current, run_spec, reason=reason)


def _failure_record(x: Driver, reason: str, now: datetime) -> Failure:
    return Failure(
        reason=str(reason),
        message=_failure_text(x),
        time=format_time(x.finished_at or now),
        exit_code=x.exit_code,
        driver=x.name,
        attempt=x.attempt,
    )


def _failed(d: _Draft, x: Driver, run_spec: QuerySpec, reason: str) -> Decision:
    """A driver ended (or vanished) and retrying may help: restart after a backoff, or give up."""
    old, now = d.old, d.inputs.now
    policy = run_spec.restart_policy
    text = _failure_text(x)
    d.status.last_failure = _failure_record(x, reason, now)
    d.status.driver_start_time = None
    if policy.type is RestartType.NEVER:
        d.event("Warning", Reason.RESTART_POLICY_NEVER, f"driver {x.name} failed ({text}); restartPolicy Never")
        d.phase(Phase.FAILED, Reason.RESTART_POLICY_NEVER, f"driver {x.name} failed and restartPolicy is Never: {text}")
        return d.finish("fail")
    if policy.restart_limit is not None and old.restarts >= policy.restart_limit:
        message = f"gave up after {old.restarts} restart(s) (maxRestarts {policy.max_restarts}): {text}"
        d.event("Warning", Reason.RESTART_LIMIT, f"driver {x.name} failed; {message}")
        d.phase(Phase.FAILED, Reason.RESTART_LIMIT, message)
        return d.finish("fail")
    restarts = old.restarts + 1
    delay = backoff_delay(restarts, policy.backoff.initial, policy.backoff.max)
    next_at = (x.finished_at or now) + timedelta(seconds=delay)
    d.status.restarts = restarts
    d.status.next_restart_time = format_time(next_at)
    d.restarted = True
    limit = f"/{policy.restart_limit}" if policy.restart_limit is not None else ""
    d.event("Warning", reason, f"driver {x.name} {'disappeared' if reason == Reason.DRIVER_LOST else 'ended'} ({text}); "
                               f"restart {restarts}{limit} in {delay:g}s from the checkpoint")  # fmt: skip
    d.phase(Phase.RESTARTING, reason, f"restart {restarts}{limit} at {d.status.next_restart_time}: {text}")
    d.wait((next_at - now).total_seconds())
    return d.finish("backoff")


def creation_failed(decision: Decision, inputs: Inputs, error: str, retry_in: float) -> Decision:
    """The API refused to create the driver: keep the old status, say why, try again later."""
    d = _Draft(inputs=inputs, status=inputs.status.model_copy(deep=True))
    d.status.observed_generation = inputs.generation
    d.status.mode = decision.status.mode
    if d.status.phase is None:
        d.status.phase = Phase.PENDING
    d.reason = Reason.DRIVER_CREATE_FAILED
    d.status.message = f"cannot create the driver: {error}"
    previous = inputs.status.condition(ConditionType.DEGRADED)
    if previous is None or previous.message != d.status.message:
        d.event("Warning", Reason.DRIVER_CREATE_FAILED, d.status.message)
    d.wait(retry_in)
    return d.finish("create-failed")
