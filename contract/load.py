"""Read a spec from a file or a StreamingQuery resource, the same way for both."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from contract.names import API_VERSION, KIND, query_name_problem
from contract.policy import OperatorFacts, Policy, check_policy
from contract.problems import Problem, SpecError, problems_from_validation_error
from contract.rules import check_rules
from contract.spec import QuerySpec


@dataclass(frozen=True)
class QueryDocument:
    """A spec with the name that identifies its query (and its Spark query name)."""

    name: str
    namespace: str | None
    spec: QuerySpec
    annotations: dict[str, str] = field(default_factory=dict)  # e.g. streamq.io/resume-from, set by the operator


def parse_text(text: str, origin: str = "<spec>") -> Any:
    try:
        return yaml.safe_load(text)  # YAML is a superset of JSON
    except yaml.YAMLError as exc:
        raise SpecError([Problem("", f"{origin} is not valid YAML/JSON: {exc}")]) from None


def load_document(
    data: Any, default_name: str = "query", *, policy: Policy | None = None, facts: OperatorFacts | None = None
) -> QueryDocument:
    """Accept either a whole StreamingQuery resource or a bare spec mapping.

    With a ``policy``, the spec must also keep it (``contract.policy``); the
    resource's namespace, when it has one, is the query's namespace."""
    if not isinstance(data, dict):
        raise SpecError([Problem("", f"expected a mapping, got {type(data).__name__}")])
    if "kind" in data or "apiVersion" in data:
        problems = []
        if data.get("kind") != KIND:
            problems.append(Problem("kind", f"expected {KIND!r}, got {data.get('kind')!r}"))
        if data.get("apiVersion") != API_VERSION:
            problems.append(Problem("apiVersion", f"expected {API_VERSION!r}, got {data.get('apiVersion')!r}"))
        metadata = data.get("metadata") or {}
        if not isinstance(metadata, dict) or not metadata.get("name"):
            problems.append(Problem("metadata.name", "a StreamingQuery needs a name"))
            metadata = {}
        if problems:
            raise SpecError(problems)
        namespace = metadata.get("namespace")
        bad_name = query_name_problem(str(metadata["name"]))
        try:
            spec = validate_spec(data.get("spec"), prefix="spec", policy=policy, facts=facts, namespace=namespace)
        except SpecError as exc:  # the name's problem and the spec's, all in one answer
            if bad_name is not None:
                raise SpecError([Problem("metadata.name", bad_name), *exc.problems]) from None
            raise
        if bad_name is not None:
            raise SpecError([Problem("metadata.name", bad_name)])
        written = metadata.get("annotations")
        annotations = written if isinstance(written, dict) else {}
        return QueryDocument(str(metadata["name"]), namespace, spec,
                             {str(k): str(v) for k, v in annotations.items()})  # fmt: skip
    return QueryDocument(default_name, None, validate_spec(data, prefix="spec", policy=policy, facts=facts))


def validate_spec(
    raw: Any,
    prefix: str = "spec",
    *,
    policy: Policy | None = None,
    facts: OperatorFacts | None = None,
    namespace: str | None = None,
) -> QuerySpec:
    """Shape and cross-field rules, then the ``policy`` when one is given (None: no policy;
    ``facts``: the operator's job image and accounts, the chart's defaults when None;
    ``namespace``: the query's). Raises SpecError listing every problem."""
    if not isinstance(raw, dict):
        raise SpecError([Problem(prefix, "expected a mapping with source, sink, trigger and checkpoint")])
    try:
        spec = QuerySpec.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(problems_from_validation_error(exc, prefix)) from None
    problems = check_rules(spec, prefix)
    if policy is not None:
        problems += check_policy(spec, policy, namespace=namespace, facts=facts, prefix=prefix)
    if problems:
        raise SpecError(problems)
    return spec


def load_file(path: str | Path, *, policy: Policy | None = None, facts: OperatorFacts | None = None) -> QueryDocument:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError([Problem("", f"cannot read {path}: {exc.strerror}")]) from None
    return load_document(parse_text(text, str(path)), default_name=path.stem, policy=policy, facts=facts)


def dump_spec(spec: QuerySpec) -> str:
    """The wire form (camelCase JSON), as the controller hands it to the driver."""
    return json.dumps(spec.model_dump(mode="json", by_alias=True, exclude_none=True), sort_keys=True)
