"""Every cross-field rule of a spec, in one table; the CRD's CEL is generated from it.

Single-field constraints live on the model's fields (``contract.spec``).
Rules that tie fields together live here, one ``Rule`` each: a Python check
that reports every problem at a path the user can find, and, where CEL can say
it, the same rule for the API server, so ``kubectl apply`` refuses the spec
before anything runs. Deleting a rule from ``RULES`` removes it from both.

Spark's own analyser is the exact layer (``app.pipeline.analyser``); these
rules catch the common mistakes without a JVM, with a message that says what to change.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes.utils import parse_quantity

from contract import exactly_once, sql
from contract import spec as model
from contract.expressions import transform_texts
from contract.modes import Mode
from contract.problems import Problem
from contract.spec import QuerySpec, duration_ms

Found = Iterator[tuple[str, str]]  # (path below spec, message)


@dataclass(frozen=True)
class Cel:
    """One x-kubernetes-validations entry; ``at`` is the property path from spec to the object that carries it."""

    rule: str
    message: str | None = None
    message_expression: str | None = None
    field_path: str | None = None
    at: tuple[str, ...] = ()

    def entry(self) -> dict[str, str]:
        out = {"rule": self.rule}
        if self.message is not None:
            out["message"] = self.message
        if self.message_expression is not None:
            out["messageExpression"] = self.message_expression
        if self.field_path is not None:
            out["fieldPath"] = self.field_path
        return out


@dataclass(frozen=True)
class Rule:
    name: str
    check: Callable[[QuerySpec], Iterable[tuple[str, str]]]
    cel: tuple[Cel, ...] = ()


def check_rules(spec: QuerySpec, prefix: str = "spec", rules: Iterable[Rule] | None = None) -> list[Problem]:
    """Every problem the rules find, each at a path below ``prefix``."""
    return [
        Problem(f"{prefix}{path}", message) for rule in (RULES if rules is None else rules) for path, message in rule.check(spec)
    ]


def _or_default(path: str, default: Any) -> str:
    """`self.a.b` if set, else the model's default, as a CEL expression."""
    parent, _, leaf = path.rpartition(".")
    literal = f"'{default}'" if isinstance(default, str) else str(default)
    return f"(has({parent}.{leaf}) ? {path} : {literal})"


# --- which sources, sinks and output modes each trigger mode allows ------------------


def _kinds_rule(mode: Mode, what: str, allowed: frozenset[str], every: Iterable[str]) -> Rule:
    verb = "read from" if what == "source" else "write to"
    message = f"{mode} mode cannot {verb} a {{kind}} {what} (allowed: {', '.join(sorted(allowed))})"

    def check(spec: QuerySpec) -> Found:
        kind = getattr(spec, what).kind
        if spec.mode is mode and kind not in allowed:
            yield f".{what}", message.format(kind=kind)

    cel = tuple(
        Cel(f"!has(self.trigger.{mode}) || !has(self.{what}.{kind})", message.format(kind=kind), field_path=f".{what}")
        for kind in every
        if kind not in allowed
    )
    return Rule(f"{mode}-{what}s", check, cel)


def _output_rule(mode: Mode) -> Rule:
    only = mode.only_output

    def check(spec: QuerySpec) -> Found:
        output = spec.effective_output_mode
        if spec.mode is mode and output is not only:
            yield ".outputMode", f"{mode} mode supports only {only} output, not {output}"

    cel = Cel(
        f"!has(self.trigger.{mode}) || !has(self.outputMode) || self.outputMode == '{only}'",
        message_expression=f"'{mode} mode supports only {only} output, not ' + self.outputMode",
        field_path=".outputMode",
    )
    return Rule(f"{mode}-output", check, (cel,))


def _positive_interval_rule(mode: Mode) -> Rule:
    field = mode.interval_field
    example = "1s" if field == "checkpointInterval" else "5m"
    message = f"{field} must be longer than 0 (e.g. {example})"

    def check(spec: QuerySpec) -> Found:
        if spec.mode is mode and spec.commit_interval_ms == 0:
            yield f".trigger.{mode}.{field}", message

    cel = Cel(f"!has(self.{field}) || duration(self.{field}) > duration('0s')", message, field_path=f".{field}",
              at=("trigger", str(mode)))  # fmt: skip
    return Rule(f"{mode}-interval", check, (cel,))


# --- lifecycle, slots, the source ----------------------------------------------------------


def _backoff(spec: QuerySpec) -> Found:
    backoff = spec.restart_policy.backoff
    if duration_ms(backoff.initial) > duration_ms(backoff.max):
        yield ".restartPolicy.backoff", f"initial ({backoff.initial}) is longer than max ({backoff.max})"


def _backoff_cel() -> Cel:
    b = model.Backoff()
    initial, maximum = _or_default("self.initial", b.initial), _or_default("self.max", b.max)
    return Cel(f"duration({initial}) <= duration({maximum})", "initial is longer than max", at=("restartPolicy", "backoff"))


SHARED_CHECKPOINT = "the standby driver must reach the same checkpoint: use an object store URI (s3a://, gs://, abfss://, hdfs://), a persistentVolumeClaim or a hostPath (single node)"


def _standby(spec: QuerySpec) -> Found:
    """Two driver pods take turns on one checkpoint: both must reach it, and the Lease that decides
    which one runs is this operator's, so the pod backend only."""
    if not spec.runtime.standby:
        return
    if spec.runtime.backend is not model.Backend.POD:
        yield ".runtime.standby", "a standby driver needs backend pod (the SparkApplication backend restarts its own driver)"
    if not spec.checkpoint.shared:
        yield ".checkpoint", SHARED_CHECKPOINT


def _standby_cel() -> tuple[Cel, ...]:
    wants = "has(self.runtime) && has(self.runtime.standby) && self.runtime.standby"
    shared = ("(has(self.checkpoint.volume) && (has(self.checkpoint.volume.persistentVolumeClaim) || "
              "has(self.checkpoint.volume.hostPath))) || (self.checkpoint.location.matches('^[a-z][a-z0-9+.-]*://') "
              "&& !self.checkpoint.location.startsWith('file:'))")  # fmt: skip
    pod = "!has(self.runtime.backend) || self.runtime.backend == 'pod'"
    return (
        Cel(f"!({wants}) || {shared}", SHARED_CHECKPOINT, field_path=".checkpoint"),
        Cel(f"!({wants}) || {pod}", "a standby driver needs backend pod", field_path=".runtime.standby"),
    )


S3_NEEDS_S3A = "checkpoint.s3 applies to an s3a://bucket/path location only"


def _s3_location(spec: QuerySpec) -> Found:
    if spec.checkpoint.s3 is not None and not spec.checkpoint.location.startswith("s3a://"):
        yield ".checkpoint.s3", S3_NEEDS_S3A


def _slots(spec: QuerySpec) -> Found:
    """Continuous mode holds one task slot per source partition for the query's
    life; with no slot to spare, Spark hangs silently instead of failing."""
    if not spec.mode.map_like_only or spec.source.rate is None:
        return  # Kafka partition counts are known only at start; the job checks them then
    partitions = spec.source.rate.num_partitions
    slots = spec.runtime.task_slots(spec.mode, partitions)
    if slots <= partitions:
        yield (
            ".runtime.parallelism",
            (
                f"continuous mode needs more task slots than source partitions: {partitions} partitions, "
                f"{slots} slots (set runtime.parallelism to at least {partitions + 1})"
            ),
        )


def _slots_cel() -> Cel:
    e, rate = model.ExecutorResources(), model.RateSource()
    executors = "has(self.runtime) && has(self.runtime.executors)"
    instances = f"({executors} && has(self.runtime.executors.instances) ? self.runtime.executors.instances : {e.instances})"
    cores = f"({executors} && has(self.runtime.executors.cores) ? self.runtime.executors.cores : {e.cores})"
    explicit = "(has(self.runtime) && has(self.runtime.parallelism))"
    partitions = _or_default("self.source.rate.numPartitions", rate.num_partitions)
    # unset parallelism is sized from the partitions when the job starts: always enough
    slots = f"({instances} > 0 ? {instances} * {cores} : ({explicit} ? self.runtime.parallelism : {partitions} + 1))"
    return Cel(
        f"!has(self.trigger.{Mode.CONTINUOUS}) || !has(self.source.rate) || {slots} > {partitions}",
        "continuous mode needs more task slots than source partitions: set runtime.parallelism "
        "(or executors.instances x executors.cores) above source.rate.numPartitions",
        field_path=".runtime.parallelism",
    )


# --- autoscaling (controller.decide.autoscale) ---------------------------------------------

RECOMMEND_ONLY = (
    "recommendOnly: false acts for queries of backend pod only: a microBatch driver resizes its executors in "
    "place, a continuous or realTime query moves to a driver of the new size (a warm upgrade); availableNow stops "
    "by itself, and a SparkApplication's executors are the Spark operator's. Leave recommendOnly true there and "
    "apply a recommendation through runtime.executors.instances (kubectl scale sq/NAME --replicas=N)"
)
MIN_OVER_MAX = "minExecutors is larger than maxExecutors"
OUTSIDE_RANGE = (
    "runtime.executors.instances (the size the query runs with, what kubectl scale writes) must lie within "
    "autoscaling.minExecutors and maxExecutors"
)
POSITIVE = "must be longer than 0 (e.g. {example})"


CORE_LIMIT_UNDER_REQUEST = "coreLimit is below the executor's CPU request (coreRequest, or cores when unset)"


def _core_limit(spec: QuerySpec) -> Found:
    """Kubernetes refuses a pod whose CPU limit is below its request: the driver would ask for executor
    pods that never come, and say so only in its own log."""
    ex = spec.runtime.executors
    if ex.core_limit is not None and parse_quantity(ex.core_limit) < parse_quantity(ex.cpu_request):
        yield ".runtime.executors.coreLimit", f"{CORE_LIMIT_UNDER_REQUEST}: {ex.core_limit} < {ex.cpu_request}"


def _core_limit_cel() -> Cel:
    # cores is an integer: compared as a number (string(cores) would be a string of unknown length to
    # the API server's cost estimate, which then refuses the whole schema).
    cores = _or_default("self.cores", model.ExecutorResources().cores)
    limit = "quantity(self.coreLimit)"
    against = (f"has(self.coreRequest) ? {limit}.compareTo(quantity(self.coreRequest)) >= 0 "
               f": {limit}.asApproximateFloat() >= double({cores})")  # fmt: skip
    return Cel(f"!has(self.coreLimit) || ({against})", CORE_LIMIT_UNDER_REQUEST, field_path=".coreLimit",
               at=("runtime", "executors"))  # fmt: skip


def _autoscaling(spec: QuerySpec) -> Found:
    auto = spec.autoscaling
    if auto is None:
        return
    if not auto.recommend_only and (spec.mode is Mode.AVAILABLE_NOW or spec.runtime.backend is not model.Backend.POD):
        yield ".autoscaling.recommendOnly", RECOMMEND_ONLY
    if auto.min_executors > auto.max_executors:
        yield ".autoscaling", f"{MIN_OVER_MAX} ({auto.min_executors} > {auto.max_executors})"
    instances = spec.runtime.executors.instances
    if not auto.min_executors <= instances <= auto.max_executors:
        yield (".runtime.executors.instances",
               f"{OUTSIDE_RANGE} ({instances} is not within {auto.min_executors}..{auto.max_executors})")  # fmt: skip
    for field, example in (("catchUpDuration", "5m"), ("stabilizationWindow", "1m")):
        if duration_ms(auto.model_dump(by_alias=True)[field]) == 0:
            yield f".autoscaling.{field}", POSITIVE.format(example=example)


def _autoscaling_cel() -> tuple[Cel, ...]:
    a, e = model.Autoscaling(max_executors=1), model.ExecutorResources()
    low = _or_default("self.minExecutors", a.min_executors)
    wants = "has(self.autoscaling)"
    instances = _or_default("self.runtime.executors.instances", e.instances)
    instances = f"(has(self.runtime) && has(self.runtime.executors) ? {instances} : {e.instances})"
    at = ("autoscaling",)
    pod = "!has(self.runtime) || !has(self.runtime.backend) || self.runtime.backend == 'pod'"
    positive = tuple(
        Cel(f"!has(self.{f}) || duration(self.{f}) > duration('0s')", POSITIVE.format(example=x), field_path=f".{f}", at=at)
        for f, x in (("catchUpDuration", "5m"), ("stabilizationWindow", "1m"))
    )
    return (
        Cel(
            f"!{wants} || !has(self.autoscaling.recommendOnly) || self.autoscaling.recommendOnly || "
            f"(!has(self.trigger.{Mode.AVAILABLE_NOW}) && ({pod}))",
            RECOMMEND_ONLY,
            field_path=".autoscaling.recommendOnly",
        ),
        Cel(f"{low} <= self.maxExecutors", MIN_OVER_MAX, at=at),
        Cel(
            f"!{wants} || ({_or_default('self.autoscaling.minExecutors', a.min_executors)} <= {instances} && "
            f"{instances} <= self.autoscaling.maxExecutors)",
            OUTSIDE_RANGE,
            field_path=".runtime.executors.instances",
        ),  # fmt: skip
        *positive,
    )


def _topics_or_pattern(spec: QuerySpec) -> Found:
    kafka = spec.source.kafka
    if kafka is not None and (kafka.topics is None) == (kafka.pattern is None):
        yield ".source.kafka", "set exactly one of: topics, pattern"


def _kafka(spec: QuerySpec) -> Found:
    if (kafka := spec.source.kafka) is not None:
        at = ".source.kafka"
        yield from _option_rules(kafka.options, f"{at}.options", OWNED_SOURCE_OPTIONS, KNOWN_SOURCE_OPTIONS)
        yield from _starting_offsets_rules(kafka.starting_offsets, f"{at}.startingOffsets")
        if spec.mode is Mode.CONTINUOUS and any(k.lower().startswith("endingoffsets") for k in kafka.options):
            yield f"{at}.options", "continuous mode does not support endingOffsets"
    if (sink := spec.sink.kafka) is not None:
        yield from _option_rules(sink.options, ".sink.kafka.options", OWNED_SINK_OPTIONS, KNOWN_SINK_OPTIONS)


STREAMQ_READER_MODE = (
    "reader streamq is streamq's continuous-mode Kafka source: use trigger continuous, or reader spark "
    "(Spark's Kafka source) in {mode} mode"
)
# Options of Spark's source that streamq's reader does not implement (jvm/reader ReaderOptions refuses them too).
SPARK_READER_ONLY = {
    "startingoffsetsbytimestamp": "startingOffsetsByTimestamp",
    "startingtimestamp": "startingTimestamp",
    "startingoffsetsbytimestampstrategy": "startingOffsetsByTimestampStrategy",
}


def _kafka_reader(spec: QuerySpec) -> Found:
    """``reader: streamq`` is a continuous-mode source (its table offers CONTINUOUS_READ only: Spark
    itself would refuse it at start in the other modes, with a message that names no field)."""
    kafka = spec.source.kafka
    if kafka is None or kafka.effective_reader is not model.KafkaReader.STREAMQ:
        return
    if spec.mode is not Mode.CONTINUOUS:
        yield ".source.kafka.reader", STREAMQ_READER_MODE.format(mode=spec.mode)
    for key in kafka.options:
        if key.lower() in SPARK_READER_ONLY:
            yield (f".source.kafka.options.{key}",
                   f"{SPARK_READER_ONLY[key.lower()]} is an option of Spark's Kafka source only: use startingOffsets, "
                   "or reader spark")  # fmt: skip


def _kafka_reader_cel() -> Cel:
    streamq = (
        f"has(self.source.kafka) && has(self.source.kafka.reader) && self.source.kafka.reader == '{model.KafkaReader.STREAMQ}'"
    )
    return Cel(
        f"!({streamq}) || has(self.trigger.{Mode.CONTINUOUS})",
        "reader streamq is streamq's continuous-mode Kafka source: use trigger continuous, or reader spark",
        field_path=".source.kafka.reader",
    )


def _kafka_tls(spec: QuerySpec) -> Found:
    """SASL_PLAINTEXT says "no TLS": with tls set, one of the two is a mistake the client would not report."""
    for at, endpoint in ((".source.kafka", spec.source.kafka), (".sink.kafka", spec.sink.kafka)):
        if endpoint is not None and endpoint.tls is not None and endpoint.auth is not None:
            if endpoint.auth.security_protocol is not model.SecurityProtocol.SASL_SSL:
                yield (
                    f"{at}.auth.securityProtocol",
                    f"{endpoint.auth.security_protocol} sends the SASL credentials "
                    f"without TLS, yet {at[1:]}.tls is set: use SASL_SSL (SASL over TLS with tls's CA)",
                )


def _transforms(spec: QuerySpec) -> Found:
    """A step is a query over ``input`` (sql) or an expression over the row, nothing more:
    no statement, script, file or table besides ``input`` (``contract.sql``)."""
    for path, text in transform_texts(spec):
        problems = sql.statement_problems(text) if path.endswith(".sql") else sql.expression_problems(text)
        for why in problems:
            yield path, why
    if not spec.mode.map_like_only:
        return
    for path, text in transform_texts(spec):
        for why in sql.not_map_like(text):
            yield path, f"{spec.mode} mode {why}"


# Spark Kafka options the spec sets through its own fields.
OWNED_SOURCE_OPTIONS = {
    "kafka.bootstrap.servers": "bootstrapServers",
    "subscribe": "topics",
    "subscribepattern": "pattern",
    "assign": "topics",
    "startingoffsets": "startingOffsets",
}
OWNED_SINK_OPTIONS = {"kafka.bootstrap.servers": "bootstrapServers", "topic": "topic"}
AUTH_OPTIONS = {"kafka.sasl.jaas.config", "kafka.sasl.mechanism", "kafka.security.protocol"}
# Kafka client settings Spark manages itself and refuses (see Spark's Kafka integration guide).
SPARK_MANAGED_KAFKA = {
    "kafka.auto.offset.reset",
    "kafka.key.deserializer",
    "kafka.value.deserializer",
    "kafka.key.serializer",
    "kafka.value.serializer",
    "kafka.enable.auto.commit",
    "kafka.interceptor.classes",
}
KNOWN_SOURCE_OPTIONS = {
    "startingoffsetsbytimestamp",
    "startingtimestamp",
    "startingoffsetsbytimestampstrategy",
    "endingoffsets",
    "endingoffsetsbytimestamp",
    "endingtimestamp",
    "failondataloss",
    "kafkaconsumer.polltimeoutms",
    "fetchoffset.numretries",
    "fetchoffset.retryintervalms",
    "maxoffsetspertrigger",
    "minoffsetspertrigger",
    "maxtriggerdelay",
    "minpartitions",
    "maxrecordsperpartition",
    "groupidprefix",
    "includeheaders",
}
KNOWN_SINK_OPTIONS = {"includeheaders"}
SECRET_LOOKING = re.compile(r"password|secret|jaas|token|sasl\.oauthbearer", re.IGNORECASE)


def _option_rules(options: dict[str, str], at: str, owned: dict[str, str], known: set[str]) -> Found:
    for key, value in options.items():
        lowered = key.lower()
        if lowered in owned:
            yield f"{at}.{key}", f"set through the {owned[lowered]} field, not options"
        elif lowered in AUTH_OPTIONS:
            yield f"{at}.{key}", "credentials come from auth.secretRef, not options"
        elif SECRET_LOOKING.search(key):
            yield f"{at}.{key}", "looks like a secret: put it in a Secret and reference it from auth.secretRef"
        elif lowered in SPARK_MANAGED_KAFKA:
            yield f"{at}.{key}", "Spark manages this Kafka setting itself and refuses it"
        elif lowered.startswith("kafka."):
            if lowered == "kafka." or not re.fullmatch(r"kafka\.[a-z0-9]+([.\-][a-z0-9]+)*", lowered):
                yield f"{at}.{key}", "not a Kafka client setting name (e.g. kafka.request.timeout.ms)"
        elif lowered not in known:
            yield (
                f"{at}.{key}",
                f"unknown option; Kafka client settings need the kafka. prefix, Spark options are: {', '.join(sorted(known))}",
            )
        if not isinstance(value, str) or value == "":
            yield f"{at}.{key}", "needs a non-empty value"


def _starting_offsets_rules(value: str, at: str) -> Found:
    if value in ("earliest", "latest"):
        return
    try:
        parsed = json.loads(value)
    except ValueError:
        yield (at, 'use "earliest", "latest" or JSON like {"topic":{"0":42}}')
        return
    valid = isinstance(parsed, dict) and all(
        isinstance(parts, dict) and all(isinstance(o, int) and str(k).isdigit() for k, o in parts.items())
        for parts in parsed.values()
    )
    if not valid:
        yield (at, 'JSON offsets must look like {"topic":{"0":42,"1":-2}} (-2 earliest, -1 latest)')


RULES: tuple[Rule, ...] = (
    *(_kinds_rule(mode, "source", mode.sources, model.Source.model_fields) for mode in Mode),
    *(_kinds_rule(mode, "sink", mode.sinks, model.Sink.model_fields) for mode in Mode),
    *(_output_rule(mode) for mode in Mode if mode.only_output is not None),
    *(_positive_interval_rule(mode) for mode in Mode if mode.needs_positive_interval),
    Rule("backoff-order", _backoff, (_backoff_cel(),)),
    Rule("continuous-slots", _slots, (_slots_cel(),)),
    Rule("standby-shared-checkpoint", _standby, _standby_cel()),
    Rule("autoscaling", _autoscaling, _autoscaling_cel()),
    Rule("executor-core-limit", _core_limit, (_core_limit_cel(),)),
    Rule(
        "checkpoint-s3-location",
        _s3_location,
        (Cel("!has(self.s3) || self.location.startsWith('s3a://')", S3_NEEDS_S3A, field_path=".s3", at=("checkpoint",)),),
    ),
    Rule(
        "kafka-topics-or-pattern",
        _topics_or_pattern,
        (Cel("has(self.topics) != has(self.pattern)", "set exactly one of: topics, pattern", at=("source", "kafka")),),
    ),
    Rule("kafka-options", _kafka),
    Rule("kafka-reader", _kafka_reader, (_kafka_reader_cel(),)),
    Rule("kafka-tls-protocol", _kafka_tls),
    Rule("transforms", _transforms),
    *(
        Rule(name, check, tuple(Cel(rule, message, field_path=path) for rule, message, path in cel))
        for name, check, cel in exactly_once.checks()
    ),
)
