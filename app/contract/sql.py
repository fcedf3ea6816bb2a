"""What a transform's SQL does, read with a SQL parser (sqlglot, Spark dialect).

Only what continuous processing cannot run matters here: aggregation, joins,
ordering and the current time. Text the parser cannot read is left to Spark's
own analyser (``app.validation.analyser``), the exact layer.
"""

from __future__ import annotations

from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

_TIME_NODES = (exp.CurrentTimestamp, exp.CurrentDate, exp.CurrentTime, exp.Localtimestamp)
_TIME_FUNCTIONS = {"now", "current_timestamp", "current_date", "localtimestamp", "current_timezone"}
_GROUPING_FUNCTIONS = {"window", "session_window", "grouping", "grouping_id"}


@lru_cache(maxsize=1024)
def _tree(text: str) -> exp.Expression | None:
    try:
        return sqlglot.parse_one(text, dialect="spark")
    except SqlglotError:
        return None


def _name(node: exp.Expression) -> str:
    return (node.name if isinstance(node, exp.Anonymous) else node.key).lower()


def not_map_like(text: str) -> list[str]:
    """Why this expression or query is not a map-like step (empty: it is, or it could not be read)."""
    tree = _tree(text)
    if tree is None:
        return []
    found: list[str] = []
    for node in tree.walk():
        if isinstance(node, _TIME_NODES) or (isinstance(node, exp.Anonymous) and node.name.lower() in _TIME_FUNCTIONS):
            found.append(f"does not support current time operations ({_name(node)})")
        elif isinstance(node, (exp.AggFunc, exp.Group, exp.Window, exp.Distinct)) or (
            isinstance(node, exp.Anonymous) and node.name.lower() in _GROUPING_FUNCTIONS
        ):
            found.append(f"supports map-like steps only; {_name(node)!r} aggregates")
        elif isinstance(node, exp.Join):
            found.append("supports map-like steps only; joins are not allowed")
        elif isinstance(node, (exp.Order, exp.Limit)):
            found.append("supports map-like steps only; ORDER BY / LIMIT are not allowed")
    return list(dict.fromkeys(found))


def reads_view(text: str, view: str) -> bool:
    """Does the query read the named view? (True when it could not be read: Spark will tell.)"""
    tree = _tree(text)
    if tree is None:
        return True
    return any(table.name.lower() == view.lower() for table in tree.find_all(exp.Table))
