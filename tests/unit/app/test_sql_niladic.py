"""Functions Spark calls without parentheses (``user``, ``current_date``...): the allow-list and the
continuous-mode checks see them written alone too, in every step that holds SQL.

What Spark does with them was tried on Spark 4.3 (pyspark in .venv): ``SELECT user``,
``SELECT `user` `` and ``SELECT user/**/`` all return the pod's user when no column is named
so; ``input.user``, ``builtin.user`` and ``x AS user`` never call it."""

from __future__ import annotations

import pytest

from contract import sql
from contract.load import validate_spec
from contract.policy import OperatorFacts, Policy
from contract.problems import SpecError
from testbed.specs import changed, query_spec

pytestmark = pytest.mark.unit

MICRO_BATCH = query_spec(mode="microBatch")
CONTINUOUS = query_spec(mode="continuous")


def problems(spec: dict, policy: Policy | None = None) -> list[str]:
    try:
        validate_spec(spec, policy=policy or Policy(), facts=OperatorFacts(), namespace="team-a")
    except SpecError as exc:
        return [str(p) for p in exc.problems]
    return []


def with_step(base: dict, **transform) -> dict:
    return changed(base, {"transforms": [*base["transforms"], transform]})


# Where a step holds SQL: (the step, the path its problems name).
STEPS = {
    "where": (lambda text: {"where": f"{text} IS NOT NULL"}, "spec.transforms[3].where"),
    "select": (lambda text: {"select": [f"{text} AS who", "value"]}, "spec.transforms[3].select[0]"),
    "withColumn.expr": (lambda text: {"withColumn": {"name": "who", "expr": text}}, "spec.transforms[3].withColumn.expr"),
    "sql": (lambda text: {"sql": f"SELECT key, {text} AS who, value FROM input"}, "spec.transforms[3].sql"),
}
REFUSED_ALONE = [
    "user", "USER", "User", "current_user", "CURRENT_USER", "session_user", "Session_User",
    "`user`", "`CURRENT_USER`", "current_user/**/", "/* c */ user /* d */", "user -- a comment\n",
    "concat(user, 'x')", "upper(session_user)", "CASE WHEN true THEN current_user END",
    "transform(array(1), x -> user)",
]  # fmt: skip


@pytest.mark.parametrize("step", sorted(STEPS))
@pytest.mark.parametrize("text", REFUSED_ALONE)
def test_a_refused_function_written_alone_is_refused_in_every_step(step, text):
    make, path = STEPS[step]
    found = problems(with_step(MICRO_BATCH, **make(text)))
    assert any(p.startswith(f"{path}: policy.allowedSQLFunctions: ") and "written alone" in p for p in found), found


@pytest.mark.parametrize("text", [
    "input.user",  # a column of the named relation: never the function
    "input.`user`",
    "input . current_user",
    "named_struct('user', 1).user",  # a struct's field
    "'user'",  # strings are data
    "\"user\"",
    "concat('current_user', value)",
])  # fmt: skip
def test_a_qualified_name_or_a_string_is_no_call(text):
    assert sql.bare_calls(text) == [] and sql.function_problems(text) == []


@pytest.mark.parametrize(("text", "bare"), [
    ("user", ["user"]),
    ("`user`", ["user"]),  # Spark 4.3: a backticked one-part name is the call too when no column has it
    ("x AS user", []),  # an alias names, it is not evaluated
    ("user.name", []),  # a column `user`'s field: a two-part name is never the call
    ("user()", []),  # a call: called_names has it
    ("current_date > x AND current_timestamp > y", ["current_date", "current_timestamp"]),
    ("current_catalog", []),  # Spark 4.3 reads these alone as columns only
    ("localtimestamp", []),
    ("current_path", ["current_path"]),
])  # fmt: skip
def test_bare_calls(text, bare):
    assert sql.bare_calls(text) == bare


def test_a_sql_step_reads_a_column_named_user_through_the_view():
    spec = with_step(MICRO_BATCH, sql="SELECT key, input.user AS who, value FROM input")
    assert problems(spec) == []


def test_the_platform_can_open_a_function_written_alone_as_it_opens_the_call():
    spec = with_step(MICRO_BATCH, where="user IS NOT NULL")
    assert problems(spec)
    assert problems(spec, Policy(allowedSQLFunctions=["user"])) == []
    assert problems(spec, Policy(allowedSQLFunctions=["*"])) == []
    assert problems(spec, Policy(allowedSQLFunctions=["current_user"]))  # user is its own name


def test_allowed_functions_written_alone_pass_outside_continuous_mode():
    for text in ("current_date", "current_timestamp", "current_time", "localtime", "current_path"):
        assert problems(with_step(MICRO_BATCH, withColumn={"name": "t", "expr": text})) == [], text


@pytest.mark.parametrize("text", [
    "current_date", "CURRENT_TIMESTAMP", "current_time", "localtime", "`current_time`", "current_date/**/",
    "current_time()", "localtime()", "curdate()", "date_add(current_date, 1)",
])  # fmt: skip
def test_continuous_mode_refuses_the_current_time_written_alone_or_called(text):
    found = problems(with_step(CONTINUOUS, withColumn={"name": "t", "expr": text}))
    assert any(p.startswith("spec.transforms[3].withColumn.expr") and "current time" in p for p in found), found


@pytest.mark.parametrize("text", ["input.current_date", "x AS current_time", "'current_timestamp'"])
def test_continuous_mode_takes_a_column_or_a_string_of_that_name(text):
    assert not [why for why in sql.not_map_like(text) if "current time" in why]
