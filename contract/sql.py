"""What a transform's SQL does, read with a SQL parser (sqlglot, Spark dialect).

Two questions, both answered by allow-list:

* **Is it a query over ``input`` and nothing else?** A ``sql`` step is one ``SELECT``
  (or a ``UNION`` of them, with CTEs) whose only relation is the view ``input``; an
  expression (``where``, ``select``, ``withColumn.expr``) reads no relation at all. No
  DDL, ``SET``, ``ADD JAR``, script ``TRANSFORM ... USING``, file relations
  (``text.`/path```), table-valued functions, hints or ``${...}`` substitution (Spark
  fills those from its configuration and the environment). Text the parser cannot
  read is refused: what cannot be checked does not run.
* **Which functions does it call?** Every name written before ``(`` is read from the
  token stream, not from the parsed tree, so a name the parser would rewrite or
  ignore is still seen. It must be in Spark's own registry
  (``contract.spark_functions``) and not among ``REFUSED_FUNCTIONS``: functions
  that call Java, load code, or read files or the environment. The platform can
  open those by name (``policy.allowedSqlFunctions``).

What continuous processing cannot run (aggregation, joins, ordering, the current
time) is answered here too (``not_map_like``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from functools import lru_cache
from itertools import pairwise

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.tokenizer_core import Token, TokenType

from contract.spark_functions import SPARK_FUNCTIONS

logging.getLogger("sqlglot").setLevel(logging.ERROR)  # unreadable text is refused here, with its own message

VIEW = "input"

# Refused unless the platform names them (policy.allowedSqlFunctions): why, for the message.
REFUSED_FUNCTIONS: dict[str, str] = {
    **dict.fromkeys(("reflect", "java_method", "try_reflect"), "it calls any Java method"),
    **dict.fromkeys(
        ("from_protobuf", "to_protobuf", "from_avro", "to_avro", "schema_of_avro"),
        "it loads a schema or descriptor from a file or URL",
    ),
    **dict.fromkeys(
        (
            # every xpath function of the registry, so that one a newer Spark adds is refused too
            *sorted(name for name in SPARK_FUNCTIONS if name.startswith("xpath")),
            "from_xml",
            "schema_of_xml",
        ),
        "it parses XML, whose external entities can read files",
    ),  # fmt: skip
    **dict.fromkeys(
        (
            "current_user",
            "user",
            "session_user",
            "version",
            "python_worker_logs",
            "input_file_name",
            "input_file_block_length",
            "input_file_block_start",
        ),
        "it reads the environment the query runs in",
    ),  # fmt: skip
}
# Words of Spark's grammar that may stand before "(" without being a call.
SYNTAX_WORDS = frozenset(
    "in as from join on where having select and or not over then else is like ilike rlike between all "
    "some distinct union intersect except minus with by partition cube rollup sets grouping interval lateral "
    "view case end null asc desc order sort cluster distribute for to at of escape nulls rows preceding "
    "following unbounded current within group try_cast varchar numeric dec character returns exists "
    "filter".split()
)
DEFAULT_SQL_FUNCTIONS = SPARK_FUNCTIONS - REFUSED_FUNCTIONS.keys()
# Names Spark calls when written alone, without "(": its grammar's currentLike words and the
# analyser's LiteralFunctionResolution turn a one-part name into the call when no column has that
# name, backticked or not (`user` is current_user() too). Tried on Spark 4.3: current_catalog,
# current_database, current_schema, current_timezone and localtimestamp alone are columns only.
NILADIC_FUNCTIONS = frozenset(
    {"current_user", "user", "session_user", "current_date", "current_timestamp", "current_time", "localtime",
     "current_path"}
)  # fmt: skip

_TIME_NODES: dict[type[exp.Expr], str] = {exp.CurrentTimestamp: "current_timestamp", exp.CurrentDate: "current_date",
               exp.CurrentTime: "current_time", exp.Localtimestamp: "localtimestamp", exp.Localtime: "localtime"}  # fmt: skip
_TIME_FUNCTIONS = {"now", "current_timestamp", "current_date", "curdate", "localtimestamp", "current_timezone",
                   "current_time", "localtime"}  # fmt: skip
_GROUPING_FUNCTIONS = {"window", "session_window", "grouping", "grouping_id"}
# Text Spark reads differently from a plain query: hints hold expressions in a comment,
# ${...} is filled from Spark's configuration (and the environment) before parsing.
_FORBIDDEN_TEXT = {"/*+": "hints (/*+ ... */) are not allowed", "${": "${...} substitution is not allowed"}
_TOKENIZER = Spark.tokenizer_class()
# What can name a call: any word (keywords included), a quoted identifier, a string (a
# double-quoted name once doubleQuotedIdentifiers is on). Punctuation before "(" is not a call.
_NAME_TOKENS = (TokenType.IDENTIFIER, TokenType.STRING, TokenType.VAR)
_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# Calls the parser mistakes for grammar in some places (``GROUP BY window(ts, '1 minute')``
# reads as a WINDOW clause): renamed for the structural parse only. Renaming one call to
# another name changes no relation, statement or clause, which is all that parse is for.
_MISREAD_CALLS = {"window": "__window"}


def _renamed_calls(text: str) -> str | None:
    tokens = _tokens(text)
    if tokens is None:
        return None
    out, at = [], 0
    for token, following in pairwise(tokens):
        new = _MISREAD_CALLS.get(token.text.lower())
        if new is not None and following.token_type is TokenType.L_PAREN and token.token_type is not TokenType.STRING:
            out += [text[at : token.start], new]
            at = token.end + 1
    return "".join([*out, text[at:]]) if out else None


@lru_cache(maxsize=1024)
def _statements(text: str) -> tuple[exp.Expr, ...] | None:
    for candidate in (text, _renamed_calls(text)):
        if candidate is None:
            continue
        try:
            return tuple(s for s in sqlglot.parse(candidate, dialect="spark") if s is not None)
        except Exception:  # noqa: BLE001 - the parser also crashes (IndexError, ...) on text it cannot read
            continue
    return None


def _tree(text: str) -> exp.Expr | None:
    statements = _statements(text)
    return statements[0] if statements and len(statements) == 1 else None


@lru_cache(maxsize=1024)
def _tokens(text: str) -> tuple[Token, ...] | None:
    try:
        return tuple(_TOKENIZER.tokenize(text))
    except Exception:  # noqa: BLE001 - as above: unreadable text is refused, never a crash
        return None


def _name(node: exp.Expr) -> str:
    return (node.name if isinstance(node, exp.Anonymous) else node.key).lower()


def called_names(text: str) -> list[str] | None:
    """Every word written just before ``(`` (a call, or grammar), lower case, in order;
    None when the text cannot be tokenised."""
    tokens = _tokens(text)
    if tokens is None:
        return None
    return [
        token.text.lower()
        for token, following in pairwise(tokens)
        if following.token_type is TokenType.L_PAREN and (token.token_type in _NAME_TOKENS or _WORD.match(token.text))
    ]


def bare_calls(text: str) -> list[str] | None:
    """Every name of ``NILADIC_FUNCTIONS`` written alone, which Spark may read as a call, lower
    case, in order; None when the text cannot be tokenised. Not one after a dot (a struct's
    field, a column of a named relation: ``input.user``), before a dot or "(" (a struct
    column's field; a call, which ``called_names`` has), or after AS (an alias names, it is
    not evaluated). Strings are data; a double-quoted one is a string unless the platform
    opened spark.sql.ansi.doubleQuotedIdentifiers, which changes what every check here reads."""
    tokens = _tokens(text)
    if tokens is None:
        return None
    found = []
    for at, token in enumerate(tokens):
        name = token.text.lower()
        written = text[token.start : token.end + 1].lower()
        if name not in NILADIC_FUNCTIONS or written not in (name, f"`{name}`"):
            continue
        before = tokens[at - 1].token_type if at > 0 else None
        after = tokens[at + 1].token_type if at + 1 < len(tokens) else None
        if before not in (TokenType.DOT, TokenType.ALIAS) and after not in (TokenType.DOT, TokenType.L_PAREN):
            found.append(name)
    return found


def function_problems(text: str, allowed: Iterable[str] = ()) -> list[str]:
    """Why a call in ``text`` is not allowed, with or without parentheses (``bare_calls``);
    ``allowed`` adds names (``*``: every function in Spark's registry, refused ones included)."""
    opened = set(allowed)
    names = called_names(text)
    bare = bare_calls(text)
    if names is None or bare is None:
        return ["is not readable as Spark SQL"]
    found = [
        f"{name} written alone is the call {name}(), which is not allowed: {REFUSED_FUNCTIONS[name]} "
        f"(Spark calls it, backticked too, unless a column has that name; a column: input.{name} in a sql step)"
        for name in bare
        if name in REFUSED_FUNCTIONS and not opened & {name, "*"}
    ]
    for name in names:
        if name in SYNTAX_WORDS or name in opened:
            continue
        if name in REFUSED_FUNCTIONS:
            if "*" not in opened:
                found.append(f"function {name} is not allowed: {REFUSED_FUNCTIONS[name]}")
        elif name not in SPARK_FUNCTIONS:
            found.append(f"{name}(...) is not a function of Spark's registry a query may call")
    return list(dict.fromkeys(found))


def _text_problems(text: str) -> list[str]:
    return [why for marker, why in _FORBIDDEN_TEXT.items() if marker in text]


def _relation_problems(tree: exp.Expr, views: set[str]) -> list[str]:
    found = []
    for node in tree.walk():
        if isinstance(node, exp.QueryTransform):
            found.append("TRANSFORM ... USING (a script) is not allowed")
        elif isinstance(node, exp.Values):
            found.append("VALUES relations are not allowed: read the view `input`")
        elif isinstance(node, exp.Table):
            plain = isinstance(node.this, exp.Identifier) and not node.args.get("db") and not node.args.get("catalog")
            if not plain:
                found.append(f"{node.sql(dialect='spark')} is not allowed: the only relation is the view `input`")
            elif node.name.lower() not in views:
                found.append(f"table {node.name} is not allowed: the only relation is the view `input`")
        elif isinstance(node, (exp.Unnest, exp.TableFromRows)):
            found.append(f"{node.key} relations are not allowed: read the view `input`")
    return found


def statement_problems(text: str) -> list[str]:
    """Why a ``sql`` step is not one SELECT (or UNION of SELECTs) over ``input`` only."""
    found = _text_problems(text)
    statements = _statements(text)
    if statements is None:
        return [*found, "is not readable as Spark SQL: write one SELECT ... FROM input"]
    if len(statements) != 1:
        return [*found, f"holds {len(statements)} statements; write one SELECT ... FROM input"]
    tree = statements[0]
    if not isinstance(tree, (exp.Select, exp.SetOperation, exp.Subquery)):
        return [*found, f"{tree.key.upper()} statements are not allowed: write one SELECT ... FROM input"]
    names = called_names(text) or []
    if "using" in names or any(t.token_type is TokenType.USING for t in _tokens(text) or ()):
        found.append("USING is not allowed (script transforms, joins USING)")
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    found += _relation_problems(tree, {VIEW, *ctes})
    if not any(isinstance(t, exp.Table) and t.name.lower() == VIEW for t in tree.find_all(exp.Table)):
        found.append("must read from the view named `input` (the previous step)")
    return list(dict.fromkeys(found))


def expression_problems(text: str) -> list[str]:
    """Why ``where``/``select``/``withColumn`` text is not one expression over the row."""
    found = _text_problems(text)
    statements = _statements(text)
    if statements is None or len(statements) != 1:
        return [*found, "is not readable as one Spark SQL expression"]
    tree = statements[0]
    if isinstance(tree, (exp.Query, exp.Command, exp.Create, exp.Set)) or tree.find(exp.Query, exp.Table):
        found.append("an expression reads no table: subqueries and statements are not allowed")
    return list(dict.fromkeys(found))


def _written_call(node: exp.Expr | None, text: str) -> str | None:
    """The name of the call ``node`` was parsed from, as ``text`` has it (lower case): ``collect_list``
    where sqlglot says ArrayAgg. None when the node carries no position (a bare word, a node the parser
    made up) or the position is not a word followed by "(" in ``text`` (it was parsed from other text)."""
    if node is None or "start" not in node.meta:
        return None
    start, end = node.meta["start"], node.meta["end"]
    tokens = _tokens(text) or ()
    for token, following in pairwise(tokens):
        if (token.start, token.end) == (start, end) and following.token_type is TokenType.L_PAREN:
            return text[start : end + 1].strip("`").lower()
    return None


def _time_call(node: exp.Expr, text: str) -> str:
    """A current-time node named as the user wrote it: ``current_timestamp()``, ``now()``; ``unix_timestamp()``,
    which the parser reads as StrToUnix(CurrentTimestamp()): the call around the made-up node."""
    written = _written_call(node, text) or (_written_call(node.parent, text) if "start" not in node.meta else None)
    return f"{written}()" if written else _TIME_NODES.get(type(node)) or _name(node)


def _aggregate_name(node: exp.Expr, text: str) -> str:
    """``collect_list`` as written, else as Spark writes the call (``max_by``, whose node carries no position),
    else the clause (``distinct``, ``group``, ``window`` for OVER)."""
    if written := _written_call(node, text):
        return written
    if isinstance(node, exp.AggFunc):
        try:
            spark = re.match(r"([A-Za-z_]\w*)\(", node.sql(dialect="spark"))
        except Exception:  # noqa: BLE001 - a node sqlglot cannot print: its own name below
            spark = None
        if spark:
            return spark.group(1).lower()
    return _name(node)


def not_map_like(text: str) -> list[str]:
    """Why this expression or query is not a map-like step (empty: it is, or it could not be read).
    Functions are named as written, never by the parser's names for them (``currenttimestamp``)."""
    tree = _tree(text)
    if tree is None:
        return []
    bare = [name for name in bare_calls(text) or () if name in _TIME_FUNCTIONS]
    found = [f"does not support current time operations ({name})" for name in bare]
    for node in tree.walk():
        if type(node) in _TIME_NODES or (isinstance(node, exp.Anonymous) and node.name.lower() in _TIME_FUNCTIONS):
            if "start" not in node.meta and _TIME_NODES.get(type(node), "") in bare:
                continue  # a bare word, listed above (the call around it is not what made it the current time)
            found.append(f"does not support current time operations ({_time_call(node, text)})")
        elif isinstance(node, (exp.AggFunc, exp.Group, exp.Window, exp.Distinct)) or (
            isinstance(node, exp.Anonymous) and node.name.lower() in _GROUPING_FUNCTIONS
        ):
            found.append(f"supports map-like steps only; {_aggregate_name(node, text)!r} aggregates")
        elif isinstance(node, exp.Join):
            found.append("supports map-like steps only; joins are not allowed")
        elif isinstance(node, (exp.Order, exp.Limit)):
            found.append("supports map-like steps only; ORDER BY / LIMIT are not allowed")
    return list(dict.fromkeys(found))


def reads_view(text: str, view: str = VIEW) -> bool:
    """Does the query read the named view? (True when it could not be read: Spark will tell.)"""
    tree = _tree(text)
    if tree is None:
        return True
    return any(table.name.lower() == view.lower() for table in tree.find_all(exp.Table))
