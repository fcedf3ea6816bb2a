"""The restart policy: what a driver that ended or vanished means, and when the next one starts (pure).

Exit 0 completes the query, unless its mode restarts when done and the policy is
``Always``. Exit 64/65 mean ``Invalid`` (not retried). Anything else is restarted
from the checkpoint after an exponential backoff, until ``maxRestarts`` (75: the
job found its query stalled, reason ``Stalled``; 76: the source outgrew its task
slots). Running ``stableAfter`` resets the restart counter.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from contract import ExitCode
from contract.spec import QuerySpec, RestartType, duration_ms
from controller.decide import standby
from controller.decide.draft import WAIT_FOR_DELETION_S, Decision, Draft, Verb
from controller.observe import Driver, DriverPhase
from controller.phases import Phase, Reason
from controller.run import POD_KIND
from controller.status import Failure, format_time, parse_time

# looked up by the code a driver exited with (None: it did not say)
_REASON_OF_EXIT: dict[int | None, Reason] = {
    ExitCode.STALLED: Reason.STALLED,
    ExitCode.PARTITIONS_CHANGED: Reason.PARTITIONS_CHANGED,
    ExitCode.CHECKPOINT_UNWRITABLE: Reason.CHECKPOINT_UNWRITABLE,
}


def backoff_delay(restart: int, initial: str, maximum: str) -> float:
    """Seconds before the n-th restart (1-based): initial, 2x, 4x, ... capped at maximum."""
    first, cap = duration_ms(initial), duration_ms(maximum)
    doubling: int = 2 ** max(0, restart - 1)  # (int ** int is typed Any: a negative power is a float)
    return min(first * doubling, cap) / 1000.0


def ended(d: Draft, current: Driver, run_spec: QuerySpec) -> Decision:
    """The current driver ended: wait out the backoff it started, complete, give up or restart."""
    old, now = d.old, d.inputs.now
    if old.last_failure is not None and old.last_failure.attempt == current.attempt and old.phase is Phase.RESTARTING:
        next_at = parse_time(old.next_restart_time) or now
        if now >= next_at:
            d.delete(current, "backoff elapsed: making room for the next driver")
            d.wait(WAIT_FOR_DELETION_S)
            return d.finish(Verb.DELETE)
        d.wait((next_at - now).total_seconds())
        return d.finish(Verb.BACKOFF)
    policy = run_spec.restart_policy.type
    if current.phase is DriverPhase.SUCCEEDED or current.exit_code == ExitCode.OK:
        if not run_spec.mode.restarts_when_done or policy is not RestartType.ALWAYS:
            d.status.driver_start_time = None
            d.event("Normal", Reason.COMPLETED, f"driver {current.name} finished: {current.message or 'exit 0'}")
            d.phase(Phase.COMPLETED, Reason.COMPLETED, f"the query finished (driver {current.name} exited 0)")
            return d.finish(Verb.COMPLETE)
        return failed(d, current, run_spec, reason=Reason.DRIVER_EXITED)
    if current.exit_code in (ExitCode.INVALID_SPEC, ExitCode.QUERY_REFUSED):
        reason = Reason.INVALID_SPEC if current.exit_code == ExitCode.INVALID_SPEC else Reason.QUERY_REFUSED
        text = _failure_text(current)
        d.status.last_failure = _failure_record(current, reason, now)
        d.status.driver_start_time = None
        d.event("Warning", reason, f"driver {current.name} refused the query, not retrying: {text}")
        d.phase(Phase.INVALID, reason, f"the query cannot run (fix the spec): {text}")
        return d.finish(Verb.INVALID)
    return failed(d, current, run_spec, reason=_REASON_OF_EXIT.get(current.exit_code, Reason.DRIVER_FAILED))


def lost_or_waiting(d: Draft, run_spec: QuerySpec) -> Decision | None:
    """No driver of ours exists: one that should be starting or running vanished (a failure),
    or a backoff still runs. None: nothing holds the next driver back."""
    old, now = d.old, d.inputs.now
    lost = (
        old.phase in (Phase.STARTING, Phase.RUNNING)
        and old.attempt > 0
        and not (old.last_failure and old.last_failure.attempt == old.attempt)
    )
    if lost:
        gone = Driver(kind=old.driver_kind or POD_KIND, name=old.driver or "?", phase=DriverPhase.FAILED, attempt=old.attempt,
                      reason=Reason.DRIVER_LOST, message="the driver disappeared (deleted or evicted)")  # fmt: skip
        return failed(d, gone, run_spec, reason=Reason.DRIVER_LOST)
    next_at = parse_time(old.next_restart_time)
    if old.phase is Phase.RESTARTING and next_at is not None and now < next_at:
        d.wait((next_at - now).total_seconds())
        return d.finish(Verb.BACKOFF)
    return None


def failed(d: Draft, x: Driver, run_spec: QuerySpec, reason: str) -> Decision:
    """A driver ended (or vanished) and retrying may help: restart after a backoff, or give up."""
    old, now = d.old, d.inputs.now
    policy = run_spec.restart_policy
    text = _failure_text(x)
    d.status.last_failure = _failure_record(x, reason, now)
    d.status.driver_start_time = None
    if policy.type is RestartType.NEVER:
        d.event("Warning", Reason.RESTART_POLICY_NEVER, f"driver {x.name} failed ({text}); restartPolicy Never")
        d.phase(Phase.FAILED, Reason.RESTART_POLICY_NEVER, f"driver {x.name} failed and restartPolicy is Never: {text}")
        return d.finish(Verb.FAIL)
    if policy.restart_limit is not None and old.restarts >= policy.restart_limit:
        message = f"gave up after {old.restarts} restart(s) (maxRestarts {policy.max_restarts}): {text}"
        d.event("Warning", Reason.RESTART_LIMIT, f"driver {x.name} failed; {message}")
        d.phase(Phase.FAILED, Reason.RESTART_LIMIT, message)
        return d.finish(Verb.FAIL)
    restarts = old.restarts + 1
    limit = f"/{policy.restart_limit}" if policy.restart_limit is not None else ""
    if d.standby is not None:  # warm and waiting: no backoff, no new pod
        d.status.restarts = restarts
        d.restarted = True
        return standby.promote(d, x, reason, text, restarts, limit, run_spec)
    delay = backoff_delay(restarts, policy.backoff.initial, policy.backoff.max)
    next_at = (x.finished_at or now) + timedelta(seconds=delay)
    d.status.restarts = restarts
    d.status.next_restart_time = format_time(next_at)
    d.restarted = True
    d.event("Warning", reason, f"driver {x.name} {'disappeared' if reason == Reason.DRIVER_LOST else 'ended'} ({text}); "
                               f"restart {restarts}{limit} in {delay:g}s from the checkpoint")  # fmt: skip
    d.phase(Phase.RESTARTING, reason, f"restart {restarts}{limit} at {d.status.next_restart_time}: {text}")
    d.wait((next_at - now).total_seconds())
    return d.finish(Verb.BACKOFF)


def reset_when_stable(d: Draft, started: datetime, run_spec: QuerySpec) -> None:
    """A driver running ``stableAfter`` resets the restart counter; until then, look again when it will have."""
    if d.old.restarts <= 0:
        return
    now = d.inputs.now
    stable_for = timedelta(milliseconds=duration_ms(run_spec.restart_policy.stable_after))
    if now - started >= stable_for:
        d.status.restarts = 0
        d.event("Normal", Reason.STABLE, f"running for {run_spec.restart_policy.stable_after}: restart counter reset")
    else:
        d.wait((started + stable_for - now).total_seconds())


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


def _failure_record(x: Driver, reason: str, now: datetime) -> Failure:
    return Failure(
        reason=str(reason),
        message=_failure_text(x),
        time=format_time(x.finished_at or now),
        exit_code=x.exit_code,
        driver=x.name,
        attempt=x.attempt,
    )
