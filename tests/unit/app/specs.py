"""Spec dictionaries shared by the unit tests: one valid base and ways to break it."""

from __future__ import annotations

import copy


def kafka_to_kafka(mode: str = "continuous") -> dict:
    triggers = {
        "continuous": {"continuous": {"checkpointInterval": "1s"}},
        "realTime": {"realTime": {"batchDuration": "5s"}},
        "microBatch": {"microBatch": {"interval": "0s"}},
        "availableNow": {"availableNow": {}},
    }
    return {
        "source": {"kafka": {"bootstrapServers": "kafka:9092", "topics": ["payments"], "startingOffsets": "earliest"}},
        "transforms": [
            {"where": "CAST(value AS STRING) LIKE '%flag%'"},
            {"select": ["CAST(key AS STRING) AS key", "value"]},
        ],
        "sink": {"kafka": {"bootstrapServers": "kafka:9092", "topic": "flagged"}},
        "trigger": triggers[mode],
        "checkpoint": {"location": "/checkpoints/fraud"},
        "runtime": {"parallelism": 4},
    }


def resource(spec: dict, name: str = "fraud") -> dict:
    return {"apiVersion": "streamq.io/v1alpha1", "kind": "StreamingQuery", "metadata": {"name": name}, "spec": spec}


def with_change(base: dict, path: str, value) -> dict:
    """A copy of base with the dotted path set (or removed when value is DELETE)."""
    changed = copy.deepcopy(base)
    *parents, last = path.split(".")
    node = changed
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is DELETE:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return changed


DELETE = object()
