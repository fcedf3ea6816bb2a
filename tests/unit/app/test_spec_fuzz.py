"""Whatever a user (or a broken GitOps render) feeds the loader, it answers with
a SpecError listing problems, or a valid spec; it never crashes."""

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contract.load import QuerySpec, SpecError, load_document
from testbed.specs import query_spec, resource

pytestmark = pytest.mark.unit

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20))
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
FIELD_NAMES = [
    "source",
    "kafka",
    "rate",
    "sink",
    "console",
    "memory",
    "trigger",
    "continuous",
    "realTime",
    "microBatch",
    "availableNow",
    "checkpoint",
    "location",
    "transforms",
    "where",
    "select",
    "sql",
    "runtime",
    "parallelism",
    "topics",
    "pattern",
    "bootstrapServers",
    "options",
    "startingOffsets",
    "outputMode",
    "checkpointInterval",
]


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, (*prefix, i))


def _assert_loads_or_refuses(document):
    try:
        result = load_document(document)
    except SpecError as exc:
        assert exc.problems, "a SpecError must say what is wrong"
        assert all(str(p) for p in exc.problems)
    else:
        assert isinstance(result.spec, QuerySpec)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_random_documents(document):
    _assert_loads_or_refuses(document)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_valid_spec_with_one_part_replaced(data):
    mode = data.draw(st.sampled_from(["continuous", "realTime", "microBatch", "availableNow"]))
    document = resource(query_spec(mode=mode))
    paths = [p for p in _paths(document) if p]
    path = data.draw(st.sampled_from(paths))
    value = data.draw(json_values | st.sampled_from(FIELD_NAMES) | st.builds(dict, st.just({})))
    mutated = copy.deepcopy(document)
    node = mutated
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    if data.draw(st.booleans()) and isinstance(node, dict):
        node[data.draw(st.sampled_from(FIELD_NAMES))] = data.draw(json_values)
    _assert_loads_or_refuses(mutated)
