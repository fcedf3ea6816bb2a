"""The one StreamingQuery spec builder, for every test tier and the benchmarks.

``query_spec()`` is a valid kafka -> kafka fraud filter (payments whose amount is
above FLAG_ABOVE) with a continuous trigger. Everything else is a change to it:

* keywords for what most tests set: ``mode`` (a trigger of TRIGGERS), ``bootstrap``
  (source and sink), ``topic`` (the source topic), ``sink_topic``, ``location``
  (the checkpoint location);
* presets (RATE_TO_CONSOLE, ...), dictionaries of changes applied in order;
* changes by dotted path, top-level ones as keywords (``trigger={...}``), deeper
  ones as ``**{"restartPolicy.maxRestarts": 1}``; a list item is addressed by its
  index (``"transforms.0"``); the value None removes the key.

Also the data the fraud filter is tested with (``payments``, ``flagged``) and the
resource around a spec (``resource``, ``write_resource``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from contract import GROUP, VERSION

FLAG_ABOVE = 1000

TRIGGERS = {
    "continuous": {"continuous": {"checkpointInterval": "1s"}},
    "realTime": {"realTime": {"batchDuration": "5s"}},
    "microBatch": {"microBatch": {"interval": "0s"}},
    "availableNow": {"availableNow": {}},
}

FRAUD_TRANSFORMS = [
    {"withColumn": {"name": "amount", "expr": "CAST(get_json_object(CAST(value AS STRING), '$.amount') AS INT)"}},
    {"where": f"amount > {FLAG_ABOVE}"},
    {"select": ["CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value"]},
]

# A rate -> console query with a fast backoff: what the operator's tests run, where
# no job reads anything (there is no kubelet).
RATE_TO_CONSOLE: dict[str, Any] = {
    "source": {"rate": {"rowsPerSecond": 5, "numPartitions": 1}},
    "transforms": [{"where": "value % 2 = 0"}],
    "sink": {"console": {}},
    "checkpoint": {"location": "/checkpoints/q", "volume": {"persistentVolumeClaim": {"claimName": "streamq-checkpoints"}}},
    "runtime": {"parallelism": 2},
    "restartPolicy": {"backoff": {"initial": "1s", "max": "2s"}, "maxRestarts": 3},
}

# The fraud filter in micro-batches with the exactlyOnce Kafka sink (read it read_committed), written
# as by default: by the driver, one producer.
EXACTLY_ONCE: dict[str, Any] = {"trigger": TRIGGERS["microBatch"], "sink.kafka.delivery": "exactlyOnce"}
# The same, written by two producers in Spark tasks (sink.kafka.transactions.producers: 2)
EXACTLY_ONCE_FROM_TASKS: dict[str, Any] = {**EXACTLY_ONCE, "sink.kafka.transactions": {"producers": 2}}
DELIVERIES: dict[str, dict[str, Any]] = {
    "atLeastOnce": {},
    "exactlyOnce": EXACTLY_ONCE,
    "exactlyOnceFromTasks": EXACTLY_ONCE_FROM_TASKS,
}


def query_spec(
    *presets: Mapping[str, Any],
    mode: str = "continuous",
    bootstrap: str = "kafka:9092",
    topic: str = "payments",
    sink_topic: str = "flagged",
    location: str | Path = "/checkpoints/fraud",
    **changes: Any,
) -> dict:
    """A new spec dictionary: the base, then each preset, then ``changes``."""
    spec = {
        "source": {"kafka": {"bootstrapServers": bootstrap, "topics": [topic], "startingOffsets": "earliest"}},
        "transforms": FRAUD_TRANSFORMS,
        "sink": {"kafka": {"bootstrapServers": bootstrap, "topic": sink_topic}},
        "trigger": TRIGGERS[mode],
        "checkpoint": {"location": str(location)},
        "runtime": {"parallelism": 4},
    }
    for layer in (*presets, changes):
        spec = changed(spec, layer)
    return spec


def changed(base: dict, changes: Mapping[str, Any]) -> dict:
    """A deep copy of ``base`` with each dotted path set (None: removed)."""
    spec = copy.deepcopy(base)
    for path, value in changes.items():
        *parents, last = path.split(".")
        node: Any = spec
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        if isinstance(node, list):
            node[int(last)] = copy.deepcopy(value)
        elif value is None:
            node.pop(last, None)
        else:
            node[last] = copy.deepcopy(value)
    return spec


def with_change(base: dict, path: str, value: Any) -> dict:
    """``changed`` for one path: ``with_change(spec, "runtime.parallelism", 0)``."""
    return changed(base, {path: value})


def resource(spec: dict, name: str = "fraud", namespace: str | None = None, annotations: dict | None = None) -> dict:
    """The StreamingQuery object around ``spec``."""
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "StreamingQuery", "metadata": metadata, "spec": spec}


def write_resource(path: Path, name: str, spec: dict, annotations: dict | None = None) -> Path:
    """The resource as the YAML file `python -m app run` reads."""
    path.write_text(yaml.safe_dump(resource(spec, name, annotations=annotations)))
    return path


def payments(n: int, start: int = 0) -> list[tuple[str, str]]:
    """Deterministic payments (key, JSON value); every third one is above the flag threshold."""
    return [(f"p{i}", json.dumps({"id": i, "amount": 1500 if i % 3 == 0 else 20 + i % 7})) for i in range(start, start + n)]


def flagged(records: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """What the fraud filter writes for ``records``."""
    return [(k, v) for k, v in records if json.loads(v)["amount"] > FLAG_ABOVE]
