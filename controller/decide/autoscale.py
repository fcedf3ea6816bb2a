"""Lag-driven autoscaling: the executors a running query needs, recommended (pure; spec.autoscaling, issue #40).

Flink's autoscaler is the anchor. For a micro-batch query:

    target rate    = backlog / catchUpDuration + input rate / targetUtilization
    true rate      = rows processed per second of batch time, per executor: Spark's processedRowsPerSecond is a
                     batch's rows over its triggerExecution, the rate per busy second (never CPU); the job reports
                     its busy time beside it (progress.busyRatio), without which there is no estimate
    executors      = ceil(target rate / true rate per executor), within minExecutors..maxExecutors and the
                     policy's maxExecutors

Continuous and realTime queries run one long-running task per source partition for their whole life: a slot
more than the partitions need cannot help, one fewer cannot run. Their size is what the partitions need
(``partitions + 1`` slots, as continuous mode requires), and a backlog that grows at that size is said: only
more partitions help there.

The guards, each said in the reason when it holds a change back:
- a missing or stale record (older than STALE_AFTER_S), or too few records at the current size: hold;
- rates are averaged over stabilizationWindow, and the recommendation changes at most once per window;
- no smaller size within coolDown of a scale-up (of the recommendation, or of the executors seen): the added
  executors first work off the backlog;
- hysteresis: a smaller size only when it would run at targetUtilization - DOWN_BAND, a larger one when the
  current runs above targetUtilization; and at most MAX_SCALE_DOWN less in one step;
- ineffective scaling: a scale-up after which the processed rate rose by less than INEFFECTIVE_GAIN of what
  the added executors should have given is not recommended again until the executors change (Flink's
  ineffective-scaling detection; FLINK-38538's lesson: busy time alone is not a reason to scale).

The history it decides from is status.autoscaling.samples: a sample per new progress record, those of the last
``max(2 x stabilizationWindow, coolDown)``, at most MAX_SAMPLES. In recommendOnly mode nothing is changed:
status.autoscaling and a Normal event when the recommendation changes. With recommendOnly false a micro-batch
driver pod is resized in place: the operator writes the executors on its pod (EXECUTORS_ANNOTATION), and the
driver asks Spark's scheduler backend for them (app.driver.resize); status.executors follows the pod. A
continuous or realTime query cannot be: its run spec takes the recommended size (``sized``), a new spec_hash,
and the upgrade path moves it to a driver of that size (warm where the query has a standby, else a restart).
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime, timedelta
from statistics import fmean

from contract.capacity import concurrent_drivers
from contract.modes import Mode
from contract.policy import Policy, warm_upgrades
from contract.progress import ProgressRecord
from contract.spec import Autoscaling, QuerySpec, duration_ms
from controller import names
from controller.decide.draft import Decision, Draft, Event, ScaleExecutors
from controller.observe import Driver
from controller.phases import Reason
from controller.run import resizes_in_place
from controller.status import AutoscalingStatus, AutoscalingVerdict, QueryStatus, RateSample, ScaleChange, format_time, parse_time

STALE_AFTER_S = 60.0  # a newest record older than this is no ground for a decision
MIN_SAMPLES = 3  # records at the current size within the window before anything but hold
MAX_SAMPLES = 30  # the history status keeps
MAX_SCALE_DOWN = 0.5  # at most this share fewer executors in one step
DOWN_BAND = 0.1  # a smaller size must run at targetUtilization - this
INEFFECTIVE_GAIN = 0.1  # a scale-up that gave less than this share of its expected gain was ineffective


def recommend(d: Draft, current: Driver, run_spec: QuerySpec) -> None:
    """The Running path's call: the executors the current driver runs with (the /scale subresource's status),
    and with spec.autoscaling the recommendation, with a Normal event when it changes. With recommendOnly
    false, a driver that resizes in place (``Driver.executors_wanted``) is resized to it: its pod's annotation."""
    executors = current.executors_wanted if current.executors_wanted is not None else run_spec.runtime.executors.instances
    d.status.executors = executors
    d.status.executor_selector = names.selector(d.inputs.name, names.COMPONENT_EXECUTOR)
    auto = run_spec.autoscaling
    acting = auto is not None and not auto.recommend_only and current.executors_wanted is not None
    if not acting and current.executors_wanted is not None and executors != run_spec.runtime.executors.instances:
        executors = _back_to_the_spec(d, current, run_spec, executors)
    if auto is None:
        d.status.autoscaling = None
        return
    progress = d.status.progress
    record = progress if progress is not None and progress.reported_by(d.status.attempt) else None
    old = d.old.autoscaling
    new = size(auto, run_spec, previous=old, record=record, now=d.inputs.now, policy=d.inputs.policy, executors=executors)
    d.status.autoscaling = new
    wanted = new.recommended_executors
    if not auto.recommend_only and current.executors_wanted is not None:
        if wanted != executors:
            d.actions.append(ScaleExecutors(current.name, wanted, executors))
            d.status.executors = wanted
            d.event("Normal", Reason.SCALED, f"driver {current.name}: {executors} -> {wanted} executors: {new.reason}")
        return
    before = old.recommended_executors if old is not None else executors
    if wanted == before:
        return
    if auto.recommend_only or resizes_in_place(run_spec):  # (in place, but a driver made before it could be)
        why = "recommendOnly: nothing is changed" if auto.recommend_only else "this driver cannot be resized in place"
        d.event("Normal", Reason.SCALE_RECOMMENDED, f"{wanted} executors recommended, {executors} run ({why}): {new.reason}")
        return
    # a mode whose tasks are fixed at start: the next pass's run spec has the new size (sized), a new driver
    how = "a warm upgrade" if warm_upgrades(run_spec, d.inputs.policy) else "a restart: no warm upgrade for this query"
    d.event("Normal", Reason.SCALED,
            f"{executors} -> {wanted} executors: a driver of {wanted} takes over from {current.name} ({how}): {new.reason}")  # fmt: skip
    d.wait(1.0)  # the status first: the next pass reads the size from it


def sized(spec: QuerySpec, autoscaling: AutoscalingStatus | None) -> QuerySpec:
    """The spec a driver runs. With recommendOnly false in a mode whose tasks are fixed at start (continuous,
    realTime: no driver resizes in place), the recommended size is the executors.instances a driver is made
    with: a changed recommendation is a changed spec_hash, which the upgrade path carries out (warm, through the
    Lease, where it can). Elsewhere, and before any recommendation, the spec's own."""
    auto = spec.autoscaling
    if auto is None or auto.recommend_only or autoscaling is None or resizes_in_place(spec) or not spec.mode.long_running:
        return spec
    wanted = min(max(autoscaling.recommended_executors, auto.min_executors), auto.max_executors)  # the spec may be newer
    executors = spec.runtime.executors
    if wanted == executors.instances:
        return spec
    runtime = spec.runtime.model_copy(update={"executors": executors.model_copy(update={"instances": wanted})})
    return spec.model_copy(update={"runtime": runtime})


def _back_to_the_spec(d: Draft, current: Driver, run_spec: QuerySpec, executors: int) -> int:
    """Nothing resizes the driver (no autoscaling, or recommendOnly), yet its pod says another size: left by
    autoscaling that was turned off since, or written by hand. The spec's size is the one that holds."""
    instances = run_spec.runtime.executors.instances
    d.actions.append(ScaleExecutors(current.name, instances, executors))
    d.status.executors = instances
    d.event("Normal", Reason.SCALED, f"driver {current.name}: {executors} -> {instances} executors: "
            "runtime.executors.instances, as nothing resizes this query (no autoscaling, or recommendOnly)")  # fmt: skip
    return instances


NOT_RESIZED = "not resized in place"


def scale_refused(decision: Decision, old: QueryStatus, action: ScaleExecutors, why: str) -> Decision:
    """The API server refused the pod's executors annotation: the driver keeps its size (status says so), the
    next pass tries again; a Warning event when it starts being refused, not on every pass."""
    status = decision.status.model_copy(deep=True)
    status.executors = action.before
    if status.autoscaling is not None:
        status.autoscaling.reason = f"{status.autoscaling.reason}; {NOT_RESIZED}: {why}"
    events = tuple(e for e in decision.events if e.reason != Reason.SCALED)
    if not (old.autoscaling is not None and NOT_RESIZED in old.autoscaling.reason):
        events += (Event("Warning", Reason.SCALE_REFUSED, f"driver {action.name} stays at {action.before} executors, not "
                         f"{action.executors}: the API server refused the write of its pod ({why})"),)  # fmt: skip
    return replace(decision, status=status, events=events)


def size(
    auto: Autoscaling,
    spec: QuerySpec,
    *,
    previous: AutoscalingStatus | None,
    record: ProgressRecord | None,
    now: datetime,
    policy: Policy | None = None,
    executors: int | None = None,
) -> AutoscalingStatus:
    """The next status.autoscaling, from the last one, the current driver's newest record and the time.
    ``executors``: what the driver runs with, when not the spec's (a driver resized in place)."""
    executors = spec.runtime.executors.instances if executors is None else executors
    standing = previous.recommended_executors if previous is not None else executors
    samples = list(previous.samples) if previous is not None else []
    scaling = _seen_scaling(previous, executors, samples, now)
    last_change = parse_time(previous.last_change_time) if previous is not None else None
    last_up = parse_time(previous.last_scale_up_time) if previous is not None else None

    def out(recommended: int, reason: str, changed: bool = False) -> AutoscalingStatus:  # samples, scaling as they are then
        verdict: AutoscalingVerdict = "ScaleUp" if recommended > executors else "ScaleDown" if recommended < executors else "Hold"
        return AutoscalingStatus(
            current_executors=executors, recommended_executors=recommended, decision=verdict, reason=reason,
            last_change_time=format_time(now) if changed else (previous.last_change_time if previous else None),
            last_scale_up_time=format_time(now) if changed and recommended > standing
            else (previous.last_scale_up_time if previous else None),
            last_scaling=scaling, samples=_kept(samples, auto, now),
        )  # fmt: skip

    stale = _stale(record, now)
    if stale is not None:
        return out(standing, f"hold: {stale}")
    assert record is not None
    samples = _with(samples, record, executors)
    if spec.mode is Mode.AVAILABLE_NOW:
        return out(standing, "hold: availableNow processes what the source holds and stops; nothing to keep up with")
    window = timedelta(milliseconds=duration_ms(auto.stabilization_window))
    recent = [s for s in samples if s.executors == executors and _at(s) >= now - window]
    if len(recent) < MIN_SAMPLES:
        return out(standing, f"hold: measuring at {executors} executors ({len(recent)} of {MIN_SAMPLES} records "
                             f"within the stabilizationWindow {auto.stabilization_window})")  # fmt: skip
    if scaling is not None:
        scaling = _judged(scaling, recent)
    if spec.mode.long_running:
        wanted = _by_partitions(spec, record, recent)
    else:
        wanted = _by_rates(auto, spec, recent, standing)
    if isinstance(wanted, str):
        return out(standing, f"hold: {wanted}")
    candidate, why = wanted
    candidate, why = _bounded(auto, spec, policy, candidate, why, standing, executors, scaling)
    if candidate == standing:
        return out(standing, why)
    if scaling is not None and scaling.ineffective and candidate == executors < standing:
        return out(candidate, why, changed=True)  # what more executors cannot fix is withdrawn at once
    if last_change is not None and now - last_change < window:
        return out(standing, f"{why}; held at {standing} until {format_time(last_change + window)} (at most one "
                             f"change per stabilizationWindow {auto.stabilization_window})")  # fmt: skip
    if candidate < standing:
        seen_up = parse_time(scaling.at) if scaling is not None and scaling.to_executors > scaling.from_executors else None
        up_at = max([t for t in (last_up, seen_up) if t is not None], default=None)
        cool_down = timedelta(milliseconds=duration_ms(auto.cool_down))
        if up_at is not None and now - up_at < cool_down:
            return out(standing, f"{why}; held at {standing} until {format_time(up_at + cool_down)} "
                                 f"(coolDown {auto.cool_down} after a scale-up)")  # fmt: skip
    return out(candidate, why, changed=True)


# --- the history ---------------------------------------------------------------------------------


def _stale(record: ProgressRecord | None, now: datetime) -> str | None:
    """Why the newest record is no ground for a decision, None when it is."""
    if record is None:
        return "no progress record from the current driver yet"
    measured = parse_time(record.updated_at)
    if measured is None:
        return "the newest progress record says not when it was measured"
    age = (now - measured).total_seconds()
    if age > STALE_AFTER_S:
        return f"the newest progress record is {age:.0f}s old (at most {STALE_AFTER_S:.0f}s): no decision on stale rates"
    return None


def _at(sample: RateSample) -> datetime:
    moment = parse_time(sample.at)
    assert moment is not None  # samples are made from records that have a time (_stale)
    return moment


def _with(samples: list[RateSample], record: ProgressRecord, executors: int) -> list[RateSample]:
    """The history with ``record``, once: a record read again (a pass without a new one) adds nothing."""
    measured = parse_time(record.updated_at)
    if measured is None or (samples and _at(samples[-1]) >= measured):
        return samples
    sample = RateSample(at=format_time(measured), executors=executors, input=record.input_rows_per_second,
                        processed=record.processed_rows_per_second, busy=record.busy_ratio, lag=record.total_lag)  # fmt: skip
    return [*samples, sample]


def _kept(samples: list[RateSample], auto: Autoscaling, now: datetime) -> list[RateSample]:
    keep = timedelta(milliseconds=max(2 * duration_ms(auto.stabilization_window), duration_ms(auto.cool_down)))
    return [s for s in samples if _at(s) >= now - keep][-MAX_SAMPLES:]


def _seen_scaling(
    previous: AutoscalingStatus | None, executors: int, samples: list[RateSample], now: datetime
) -> ScaleChange | None:
    """A change of the executors since the last decision, with the processed rate before it; else the last one."""
    if previous is None:
        return None
    if previous.current_executors == executors:
        return previous.last_scaling
    before = [s.processed for s in samples if s.executors == previous.current_executors and s.processed is not None]
    return ScaleChange(from_executors=previous.current_executors, to_executors=executors, at=format_time(now),
                       processed_before=round(fmean(before), 3) if before else None)  # fmt: skip


def _judged(scaling: ScaleChange, recent: list[RateSample]) -> ScaleChange:
    """A scale-up, once measured at its new size: did the processed rate rise as the executors should have made it?"""
    before = scaling.processed_before
    if scaling.ineffective is not None or before is None or scaling.to_executors <= scaling.from_executors:
        return scaling
    after = [s.processed for s in recent if s.processed is not None and _at(s) > (parse_time(scaling.at) or _at(s))]
    if len(after) < MIN_SAMPLES:
        return scaling
    expected = before * (scaling.to_executors / scaling.from_executors - 1)
    return scaling.model_copy(update={"ineffective": fmean(after) - before < INEFFECTIVE_GAIN * expected})


# --- the size --------------------------------------------------------------------------------------


def _ceil(value: float) -> int:
    """Executors for a share of executors: 2.0000000000000004 (1,400 / 0.7 / 1,000) is 2."""
    return math.ceil(round(value, 6))


def _rows(value: float) -> str:
    return f"{value:,.0f}"


def _by_rates(auto: Autoscaling, spec: QuerySpec, recent: list[RateSample], standing: int) -> tuple[int, str] | str:
    """Micro-batch: Flink's target rate over the true rate per executor; a size, or why there is none."""
    measured = [s for s in recent if s.processed is not None and s.processed > 0 and s.busy is not None]
    if not measured:
        if all(s.busy is None for s in recent):
            return "the job reports no busy time (progress.busyRatio; a job before autoscaling): no true processing rate"
        return "no batch processed rows within the window: no true processing rate"
    per_executor = fmean((s.processed or 0.0) / s.executors for s in measured)
    input_rate = fmean(s.input for s in recent if s.input is not None) if any(s.input is not None for s in recent) else 0.0
    backlog = recent[-1].lag or 0
    catch_up_s = duration_ms(auto.catch_up_duration) / 1000
    busy = fmean(s.busy or 0.0 for s in measured)
    u = auto.target_utilization
    drain = backlog / catch_up_s
    up = _ceil((drain + input_rate / u) / per_executor)
    down = _ceil((drain + input_rate / max(u - DOWN_BAND, 0.05)) / per_executor)
    wanted = up if up > standing else down if down < standing else standing
    why = (f"input {_rows(input_rate)} rows/s, backlog {_rows(backlog)} rows ({_rows(drain)} rows/s to work it off "
           f"within {auto.catch_up_duration}), {_rows(per_executor)} rows/s per executor of batch time, busy "
           f"{busy:.0%}: ({_rows(drain)} + {_rows(input_rate)} / {u:g}) / {_rows(per_executor)} = {up} executors")  # fmt: skip
    if wanted == standing and up < standing:
        why += f"; {standing} kept: a smaller size must run below {u - DOWN_BAND:.0%} utilization (hysteresis)"
    executors = recent[-1].executors
    if busy < u - DOWN_BAND and backlog == 0 and executors > 0:
        # Idle most of the time with nothing waiting: the query has room at its size. Small batches are mostly
        # a batch's fixed cost (planning, offsets, commit), so their rows per second of batch time understate an
        # executor; the time busy does not (seen on the e2e cluster: 47 rows/s "per executor" at 19% busy).
        by_busy = max(_ceil(executors * busy / u), 1)
        if by_busy < wanted:
            wanted = by_busy
            why += (f"; but busy {busy:.0%} with no backlog: ceil({executors} x {busy:.2f} / {u:g}) = {by_busy} "
                    "(small batches' rate understates an executor)")  # fmt: skip
    return max(wanted, 1), why


def _by_partitions(spec: QuerySpec, record: ProgressRecord, recent: list[RateSample]) -> tuple[int, str] | str:
    """Continuous and realTime: as many slots as the partitions need, no more (more cannot help)."""
    partitions = sum((record.partitions or {}).values())
    if partitions <= 0:
        return "the job reports no source partitions: no size in a mode of one task per partition"
    cores = spec.runtime.executors.cores
    slots = partitions + 1
    wanted = math.ceil(slots / cores)
    why = (f"{spec.mode} mode runs one long-running task per source partition: {partitions} partitions need {slots} "
           f"task slots, {wanted} executors of {cores} cores; more cannot help")  # fmt: skip
    lags = [s.lag for s in recent if s.lag is not None]
    if len(lags) >= 2 and lags[-1] > lags[0]:
        why += f"; the backlog grows ({_rows(lags[0])} -> {_rows(lags[-1])} rows): only more partitions help"
    return wanted, why


def _bounded(auto: Autoscaling, spec: QuerySpec, policy: Policy | None, wanted: int, why: str, standing: int,
             executors: int, scaling: ScaleChange | None) -> tuple[int, str]:  # fmt: skip
    """``wanted`` within what may be recommended: min and max, the policy, ineffective scale-ups, the largest step down."""
    size = wanted
    if size > auto.max_executors:
        size, why = auto.max_executors, f"{why}; capped at maxExecutors {auto.max_executors}"
    if policy is not None:  # the spec keeps the policy (contract.policy); a policy changed since may be lower
        cap = policy.max_executors // concurrent_drivers(spec)
        if size > cap:
            size, why = max(cap, 1), f"{why}; capped at {cap} by policy.maxExecutors {policy.max_executors}"
    if size < auto.min_executors:
        size, why = auto.min_executors, f"{why}; at least minExecutors {auto.min_executors}"
    if scaling is not None and scaling.ineffective and size > executors:
        size = executors
        why = (f"{why}; but the scale-up from {scaling.from_executors} to {scaling.to_executors} executors did not raise "
               f"the processed rate (from {_rows(scaling.processed_before or 0)} rows/s): no larger size is recommended "
               "until the executors change")  # fmt: skip
    floor = math.ceil(standing * (1 - MAX_SCALE_DOWN))
    if size < floor:
        size, why = floor, f"{why}; at most {MAX_SCALE_DOWN:.0%} fewer in one step: {floor}"
    return size, why
