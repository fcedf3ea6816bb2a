"""Continuous mode's SQL checks read the SQL with a parser, not with patterns."""

import pytest

from contract.sql import not_map_like, reads_view

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("text", "why"), [
    ("count(*)", "'count' aggregates"),
    ("SELECT key, sum(amount) FROM input GROUP BY key", "aggregates"),
    ("sum(amount) OVER (PARTITION BY key)", "aggregates"),
    ("SELECT DISTINCT key FROM input", "aggregates"),
    ("window(ts, '1 minute')", "'window' aggregates"),
    ("SELECT * FROM input JOIN other ON input.k = other.k", "joins are not allowed"),
    ("SELECT * FROM input ORDER BY amount LIMIT 5", "ORDER BY / LIMIT"),
    ("ts > current_timestamp()", "current time operations"),
    ("now()", "current time operations (now())"),
    ("unix_timestamp() - 10", "current time operations"),
])  # fmt: skip
def test_what_is_not_map_like(text, why):
    assert any(why in found for found in not_map_like(text)), not_map_like(text)


@pytest.mark.parametrize("text", [
    "amount > 1000",
    "CAST(get_json_object(CAST(value AS STRING), '$.amount') AS DOUBLE)",
    "note LIKE '%count(%' OR note = 'join now() order by'",  # words inside strings are data
    "unix_timestamp(ts)",  # of a column: not the current time
    "SELECT key, upper(value) AS value FROM input WHERE amount > 10",
    "this is not SQL at all ((",  # unreadable: Spark's analyser decides
])  # fmt: skip
def test_what_is_map_like(text):
    assert not_map_like(text) == []


@pytest.mark.parametrize(("text", "named"), [
    ("ts > current_timestamp()", "(current_timestamp())"),
    ("SELECT CURRENT_TIMESTAMP() AS t FROM input", "(current_timestamp())"),
    ("current_timestamp > ts", "(current_timestamp)"),  # written bare: named bare
    ("unix_timestamp() - 10", "(unix_timestamp())"),  # the parser's CurrentTimestamp inside StrToUnix
    ("curdate()", "(curdate())"),  # not the parser's current_date
    ("SELECT collect_list(x) FROM input", "'collect_list' aggregates"),  # not ArrayAgg's arrayagg
    ("percentile_approx(x, 0.5)", "'percentile_approx' aggregates"),  # a node without a position
    ("SELECT max_by(a, b) FROM input", "'max_by' aggregates"),
])  # fmt: skip
def test_functions_are_named_as_written_not_by_the_parser(text, named):
    """Issue 38: a continuous-mode message said `currenttimestamp`, sqlglot's name for the node."""
    found = not_map_like(text)
    assert any(named in why for why in found), found
    assert not any(word in why for why in found for word in ("currenttimestamp", "arrayagg", "strtounix", "argmax"))


def test_reads_view():
    assert reads_view("SELECT * FROM input WHERE a > 1", "input")
    assert reads_view("SELECT * FROM INPUT", "input")
    assert not reads_view("SELECT 'input' AS x FROM other", "input")
