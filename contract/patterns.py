"""How the platform's policy lists names: exact names, or prefixes written with a trailing ``*``."""

from __future__ import annotations

from collections.abc import Iterable


def matches(value: str, patterns: Iterable[str]) -> bool:
    """Exact names, or prefixes written with a trailing ``*``."""
    return any(value.startswith(p[:-1]) if p.endswith("*") else value == p for p in patterns)


def listed(patterns: Iterable[str]) -> str:
    return ", ".join(patterns) or "none"
