"""The fast, static layer of validation: rules Spark enforces late (or never
enforces and just hangs on), checked from the spec alone in microseconds.

Spark's own analyser is the exact layer (``app.validation.analyser``); these
rules exist so that the common mistakes are caught by ``kubectl apply`` and
``streamq validate`` without a JVM, with a message that says what to change.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from app.contract.spec import OutputMode, QuerySpec, duration_ms
from app.contract.problems import Problem

# What each trigger mode can read from and write to (Spark 4.3).
ALLOWED_SOURCES = {
    "continuous": {"kafka", "rate"},
    "realTime": {"kafka"},
    "microBatch": {"kafka", "rate"},
    "availableNow": {"kafka", "rate"},
}
ALLOWED_SINKS = {
    "continuous": {"kafka", "console", "memory"},
    "realTime": {"kafka", "console", "memory"},
    "microBatch": {"kafka", "console", "memory"},
    "availableNow": {"kafka", "console", "memory"},
}

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

# Operations continuous processing cannot run (it supports map-like steps only).
_STRING_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`")
_CURRENT_TIME = re.compile(r"\b(current_timestamp|current_date|now|localtimestamp|unix_timestamp\s*\(\s*\))", re.I)
_AGGREGATION = re.compile(
    r"\bgroup\s+by\b|\bdistinct\b|\bover\s*\(|\bwindow\s*\("
    r"|\b(count|sum|avg|mean|min|max|collect_list|collect_set|approx_count_distinct|first|last|stddev|variance)\s*\(",
    re.I,
)
_JOIN = re.compile(r"\bjoin\b", re.I)
_ORDER = re.compile(r"\border\s+by\b|\blimit\s+[0-9]", re.I)


def check_rules(spec: QuerySpec, prefix: str = "spec") -> list[Problem]:
    return list(_all_rules(spec, prefix))


def _all_rules(spec: QuerySpec, p: str) -> Iterator[Problem]:
    mode = spec.mode
    if spec.source.kind not in ALLOWED_SOURCES[mode]:
        allowed = ", ".join(sorted(ALLOWED_SOURCES[mode]))
        yield Problem(f"{p}.source", f"{mode} mode cannot read from a {spec.source.kind} source (allowed: {allowed})")
    if spec.sink.kind not in ALLOWED_SINKS[mode]:
        allowed = ", ".join(sorted(ALLOWED_SINKS[mode]))
        yield Problem(f"{p}.sink", f"{mode} mode cannot write to a {spec.sink.kind} sink (allowed: {allowed})")
    yield from _output_mode_rules(spec, p)
    yield from _transform_rules(spec, p)
    yield from _slot_rules(spec, p)
    yield from _kafka_rules(spec, p)
    backoff = spec.restart_policy.backoff
    if duration_ms(backoff.initial) > duration_ms(backoff.max):
        yield Problem(f"{p}.restartPolicy.backoff", f"initial ({backoff.initial}) is longer than max ({backoff.max})")
    if mode == "continuous" and duration_ms(spec.trigger.continuous.checkpoint_interval) == 0:
        yield Problem(f"{p}.trigger.continuous.checkpointInterval", "must be longer than 0 (e.g. 1s)")
    if mode == "realTime" and duration_ms(spec.trigger.real_time.batch_duration) == 0:
        yield Problem(f"{p}.trigger.realTime.batchDuration", "must be longer than 0 (e.g. 5m)")


def _output_mode_rules(spec: QuerySpec, p: str) -> Iterator[Problem]:
    mode, output = spec.mode, spec.effective_output_mode
    if mode == "continuous" and output is not OutputMode.APPEND:
        yield Problem(f"{p}.outputMode", f"continuous mode supports only append output, not {output.value}")
    if mode == "realTime" and output is not OutputMode.UPDATE:
        yield Problem(f"{p}.outputMode", f"realTime mode supports only update output, not {output.value}")


def _expressions(spec: QuerySpec, p: str) -> Iterator[tuple[str, str]]:
    """(path, SQL text) for every expression the transforms hold."""
    for i, step in enumerate(spec.transforms):
        at = f"{p}.transforms[{i}]"
        if step.where is not None:
            yield f"{at}.where", step.where
        elif step.select is not None:
            for j, expr in enumerate(step.select):
                yield f"{at}.select[{j}]", expr
        elif step.with_column is not None:
            yield f"{at}.withColumn.expr", step.with_column.expr
        elif step.sql is not None:
            yield f"{at}.sql", step.sql


def _transform_rules(spec: QuerySpec, p: str) -> Iterator[Problem]:
    for i, step in enumerate(spec.transforms):
        if step.sql is not None and not re.search(r"\binput\b", _STRING_LITERAL.sub("''", step.sql), re.I):
            yield Problem(f"{p}.transforms[{i}].sql", "must read from the view named `input` (the previous step)")
    if spec.mode != "continuous":
        return
    for path, text in _expressions(spec, p):
        code = _STRING_LITERAL.sub("''", text)
        if match := _CURRENT_TIME.search(code):
            yield Problem(path, f"continuous mode does not support current time operations ({match.group(1)})")
        if match := _AGGREGATION.search(code):
            yield Problem(path, f"continuous mode supports map-like steps only; {match.group(0).strip()!r} aggregates")
        if _JOIN.search(code):
            yield Problem(path, "continuous mode supports map-like steps only; joins are not allowed")
        if _ORDER.search(code):
            yield Problem(path, "continuous mode supports map-like steps only; ORDER BY / LIMIT are not allowed")


def _slot_rules(spec: QuerySpec, p: str) -> Iterator[Problem]:
    """Continuous mode holds one task slot per source partition for the query's
    life; with no slot to spare, Spark hangs silently instead of failing."""
    if spec.mode != "continuous" or spec.source.rate is None:
        return  # Kafka partition counts are known only at start; the job checks them then
    partitions = spec.source.rate.num_partitions
    slots = spec.runtime.task_slots(spec.mode, partitions)
    if slots <= partitions:
        yield Problem(
            f"{p}.runtime.parallelism",
            f"continuous mode needs more task slots than source partitions: {partitions} partitions, "
            f"{slots} slots (set runtime.parallelism to at least {partitions + 1})",
        )


def _kafka_rules(spec: QuerySpec, p: str) -> Iterator[Problem]:
    if (kafka := spec.source.kafka) is not None:
        at = f"{p}.source.kafka"
        yield from _option_rules(kafka.options, f"{at}.options", OWNED_SOURCE_OPTIONS, KNOWN_SOURCE_OPTIONS, kafka.auth)
        yield from _starting_offsets_rules(kafka.starting_offsets, f"{at}.startingOffsets")
        if spec.mode == "continuous" and any(k.lower().startswith("endingoffsets") for k in kafka.options):
            yield Problem(f"{at}.options", "continuous mode does not support endingOffsets")
    if (sink := spec.sink.kafka) is not None:
        yield from _option_rules(sink.options, f"{p}.sink.kafka.options", OWNED_SINK_OPTIONS, KNOWN_SINK_OPTIONS, sink.auth)


def _option_rules(options, at, owned, known, auth) -> Iterator[Problem]:
    for key, value in options.items():
        lowered = key.lower()
        if lowered in owned:
            yield Problem(f"{at}.{key}", f"set through the {owned[lowered]} field, not options")
        elif lowered in AUTH_OPTIONS:
            yield Problem(f"{at}.{key}", "credentials come from auth.secretRef, not options")
        elif SECRET_LOOKING.search(key):
            yield Problem(f"{at}.{key}", "looks like a secret: put it in a Secret and reference it from auth.secretRef")
        elif lowered in SPARK_MANAGED_KAFKA:
            yield Problem(f"{at}.{key}", "Spark manages this Kafka setting itself and refuses it")
        elif lowered.startswith("kafka."):
            if lowered == "kafka." or not re.fullmatch(r"kafka\.[a-z0-9]+([.\-][a-z0-9]+)*", lowered):
                yield Problem(f"{at}.{key}", "not a Kafka client setting name (e.g. kafka.request.timeout.ms)")
        elif lowered not in known:
            yield Problem(
                f"{at}.{key}",
                "unknown option; Kafka client settings need the kafka. prefix, "
                f"Spark options are: {', '.join(sorted(known))}",
            )
        if not isinstance(value, str) or value == "":
            yield Problem(f"{at}.{key}", "needs a non-empty value")


def _starting_offsets_rules(value: str, at: str) -> Iterator[Problem]:
    if value in ("earliest", "latest"):
        return
    try:
        parsed = json.loads(value)
    except ValueError:
        yield Problem(at, 'use "earliest", "latest" or JSON like {"topic":{"0":42}}')
        return
    valid = isinstance(parsed, dict) and all(
        isinstance(parts, dict) and all(isinstance(o, int) and str(k).isdigit() for k, o in parts.items())
        for parts in parsed.values()
    )
    if not valid:
        yield Problem(at, 'JSON offsets must look like {"topic":{"0":42,"1":-2}} (-2 earliest, -1 latest)')
