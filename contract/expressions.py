"""The SQL a spec's transforms hold, each text with the path it stands at.

The rules, the exactly-once checks and the tenant policy all read every SQL text of a
spec; they take the list from here, below all three, so that none of them imports another
for it.
"""

from __future__ import annotations

from collections.abc import Iterator

from contract.spec import QuerySpec


def transform_texts(spec: QuerySpec) -> Iterator[tuple[str, str]]:
    """(path below spec, SQL text) for every expression the transforms hold."""
    for i, step in enumerate(spec.transforms):
        at = f".transforms[{i}]"
        if step.where is not None:
            yield f"{at}.where", step.where
        elif step.select is not None:
            for j, expr in enumerate(step.select):
                yield f"{at}.select[{j}]", expr
        elif step.with_column is not None:
            yield f"{at}.withColumn.expr", step.with_column.expr
        elif step.sql is not None:
            yield f"{at}.sql", step.sql
