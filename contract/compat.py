"""Can a query restart on an existing checkpoint? (pure)

Spark resumes a query from what its checkpoint holds: offsets per source (by
position in the query), the topics they were read from, and the state of its
stateful operators. A spec that reads other sources, other topics, or keeps
other state either fails at start or, worse, runs and silently skips or
replays records. Two comparisons, one vocabulary (each difference starts with
the spec field to change):

* ``spec_differences(old, new)``: the source a checkpoint was written with
  (a spec, or the :class:`SourceIdentity` the operator keeps in status) vs a new spec;
* ``checkpoint_differences(holds, spec)``: what the checkpoint itself holds vs
  a spec (the job, which reads the checkpoint, and the operator, from what the
  job reported).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from contract.checkpoint import CheckpointState
from contract.progress import CheckpointHolds
from contract.spec import QuerySpec


@dataclass(frozen=True)
class Holds:
    """What a checkpoint holds, as far as reusing it matters."""

    source_kinds: tuple[str, ...] = ()  # one per source, in query order: "kafka" | "other"
    topics: frozenset[str] = frozenset()  # Kafka topics with recorded offsets
    stateful_operators: tuple[str, ...] = ()  # Spark's names (stateStoreSave, dedupe, ...)

    @classmethod
    def of(cls, state: CheckpointState) -> Holds:
        offsets = state.in_flight_kafka_offsets() or state.kafka_offsets()
        return cls(
            source_kinds=tuple(state.source_kinds()),
            topics=frozenset(offsets),
            stateful_operators=tuple(o.name or "unknown" for o in state.stateful_operators),
        )

    def to_wire(self) -> CheckpointHolds:
        """As the progress record carries it (and `streamq checkpoint inspect` prints it)."""
        return CheckpointHolds(source_kinds=list(self.source_kinds), topics=sorted(self.topics),
                               stateful_operators=list(self.stateful_operators))  # fmt: skip

    @classmethod
    def from_wire(cls, wire: CheckpointHolds | None) -> Holds | None:
        if wire is None:
            return None
        return cls(source_kinds=tuple(wire.source_kinds), topics=frozenset(wire.topics),
                   stateful_operators=tuple(wire.stateful_operators))  # fmt: skip


@dataclass(frozen=True)
class SourceIdentity:
    """What of a spec's source its checkpoint depends on: the source's kind and, for Kafka,
    the topics (a set: their order does not matter to Spark) or the pattern."""

    kind: str
    topics: frozenset[str] | None = None
    pattern: str | None = None

    @classmethod
    def of(cls, spec: QuerySpec) -> SourceIdentity:
        kafka = spec.source.kafka
        if kafka is None:
            return cls(kind=spec.source.kind)
        topics = frozenset(kafka.topics) if kafka.topics is not None else None
        return cls(kind=spec.source.kind, topics=topics, pattern=kafka.pattern)


def spec_differences(old: QuerySpec | SourceIdentity, new: QuerySpec) -> list[str]:
    """How the source changed in a way Spark cannot resume from, naming the field."""
    a = old if isinstance(old, SourceIdentity) else SourceIdentity.of(old)
    b = SourceIdentity.of(new)
    if a.kind != b.kind:
        return [f"spec.source changed from {a.kind} to {b.kind}"]
    if new.source.kafka is None:
        return []
    if (a.topics is None) != (b.topics is None):
        before = f"topics {sorted(a.topics)}" if a.topics is not None else f"pattern {a.pattern!r}"
        after = f"topics {sorted(b.topics)}" if b.topics is not None else f"pattern {b.pattern!r}"
        return [f"spec.source.kafka changed from {before} to {after}"]
    if a.topics is not None and b.topics is not None and a.topics != b.topics:
        return [f"spec.source.kafka.topics changed from {sorted(a.topics)} to {sorted(b.topics)}"]
    if a.pattern != b.pattern:
        return [f"spec.source.kafka.pattern changed from {a.pattern!r} to {b.pattern!r}"]
    return []


def source_change(old: QuerySpec | SourceIdentity, new: QuerySpec) -> str | None:
    found = spec_differences(old, new)
    return found[0] if found else None


def _stateless(spec: QuerySpec) -> bool:
    """True when no step can keep state: only sql can aggregate, deduplicate or join."""
    return all(step.sql is None for step in spec.transforms)


def checkpoint_differences(holds: Holds, spec: QuerySpec) -> list[str]:
    found: list[str] = []
    kinds = holds.source_kinds
    if len(kinds) > 1:
        found.append(f"spec.source: the checkpoint was written by a query with {len(kinds)} sources, the spec has one")
    elif kinds:
        reads = "kafka" if spec.source.kafka is not None else spec.source.kind
        if (kinds[0] == "kafka") != (reads == "kafka"):
            held = f"Kafka offsets of topics {sorted(holds.topics)}" if kinds[0] == "kafka" else "offsets of a non-Kafka source"
            found.append(f"spec.source: the checkpoint holds {held}, the spec reads a {reads} source")
        elif (kafka := spec.source.kafka) is not None and holds.topics:
            if kafka.topics is not None and set(kafka.topics) != holds.topics:
                found.append(f"spec.source.kafka.topics: the checkpoint holds offsets of topics {sorted(holds.topics)}, "
                             f"the spec reads {sorted(set(kafka.topics))}")  # fmt: skip
            if kafka.pattern is not None and not any(re.fullmatch(kafka.pattern, t) for t in holds.topics):
                found.append(f"spec.source.kafka.pattern: none of the checkpoint's topics {sorted(holds.topics)} "
                             f"match {kafka.pattern!r}")  # fmt: skip
    if holds.stateful_operators:
        ops = ", ".join(holds.stateful_operators)
        if spec.mode.map_like_only:
            found.append(f"spec.trigger: the checkpoint holds the state of stateful operator(s) {ops}; "
                         f"{spec.mode} mode keeps no state")  # fmt: skip
        elif _stateless(spec):
            found.append(f"spec.transforms: the checkpoint holds the state of stateful operator(s) {ops}; "
                         "the spec's transforms keep none")  # fmt: skip
    return found


def refusal(difference: str, location: str) -> str:
    return (
        f"{difference}: the checkpoint at {location} cannot be reused by this spec (Spark would fail or "
        "silently skip or replay records). Change spec.checkpoint.location too, or set "
        "spec.checkpoint.onIncompatibleChange: newCheckpoint."
    )


def fresh_checkpoint_location(location: str, resets: int) -> str:
    """A new checkpoint next to the spec's, for the n-th incompatible change."""
    return f"{location.rstrip('/')}-reset-{resets}"


def choose_fresh_location(location: str, spec: QuerySpec, read: Callable[[str], CheckpointState]) -> tuple[str, CheckpointState]:
    """The first of location-reset-1, -2, ... that is absent or fits the spec: the same
    answer on every restart, so a fresh checkpoint is made once and then resumed from."""
    n = 1
    while True:
        candidate = fresh_checkpoint_location(location, n)
        state = read(candidate)
        if not state.exists or not checkpoint_differences(Holds.of(state), spec):
            return candidate, state
        n += 1
