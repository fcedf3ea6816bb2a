"""The StreamingQuery spec: model, loading, and static rules."""

from app.spec.load import QueryDocument, dump_spec, load_document, load_file, validate_spec
from app.spec.model import QuerySpec
from app.spec.problems import Problem, SpecError

__all__ = ["Problem", "QueryDocument", "QuerySpec", "SpecError", "dump_spec", "load_document", "load_file", "validate_spec"]
