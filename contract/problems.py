"""How a spec is found wrong: a list of problems, each at a path the user can find."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from contract import spec as model


@dataclass(frozen=True)
class Problem:
    path: str  # dotted, as in the YAML: "spec.transforms[1].sql"
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class SpecError(Exception):
    """The spec cannot run. Carries every problem found, not just the first."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("; ".join(str(p) for p in self.problems))


# Regexes are for machines (and the CRD schema); users get these words instead.
PATTERN_HINTS = {
    model.DURATION_PATTERN: "a duration like 500ms, 1s, 5m or 1h",
    model.BOOTSTRAP_PATTERN: "host:port, or several separated by commas",
    model.K8S_NAME_PATTERN: "a Kubernetes name (lowercase letters, digits, '-' and '.')",
    model.QUANTITY_PATTERN: "a Kubernetes quantity like 512Mi, 2Gi or 500m",
}


def _loc_to_path(prefix: str, loc: tuple[int | str, ...]) -> str:
    path = prefix
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def problems_from_validation_error(error: ValidationError, prefix: str = "spec") -> list[Problem]:
    problems = []
    for item in error.errors(include_url=False, include_input=False):
        # Pydantic nests union/validator context in the location; keep the
        # wire names only so the path matches the user's YAML.
        loc = tuple(p for p in item["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        message = item["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        if item["type"] == "extra_forbidden":
            message = "unknown field"
        elif item["type"] == "missing":
            message = "required field is missing"
        elif item["type"] == "string_pattern_mismatch":
            hint = PATTERN_HINTS.get(item.get("ctx", {}).get("pattern", ""))
            if hint:
                message = f"expected {hint}"
        problems.append(Problem(_loc_to_path(prefix, loc), message))
    return problems
