"""mypy, strict, over the contract and the operator (contract, controller), in the unit tier.

What is checked and how is [tool.mypy] in pyproject.toml; this runs mypy from the repository root
as a developer would (`.venv/bin/mypy`), with its cache in .mypy_cache: a warm run takes seconds.
A failure shows mypy's own output.
"""

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
MYPY = Path(sys.executable).parent / "mypy"
CHECKED = ("contract", "controller")


def test_mypy_is_strict_over_the_contract_and_the_operator():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config.get("strict") is True
    assert set(config["files"]) == set(CHECKED)
    # errors are fixed or ignored one by one (`# type: ignore[code]`, with why), never a module at once
    assert all("ignore_errors" not in override for override in config.get("overrides", []))


def test_mypy_finds_nothing():
    assert MYPY.is_file(), f"{MYPY} is missing: pip install -e '.[dev]'"
    done = subprocess.run([str(MYPY)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.fail(f"mypy (strict, [tool.mypy]):\n{done.stdout}{done.stderr}", pytrace=False)
    # every module of the checked folders was looked at: a config that left one out would pass without it
    modules = sum(1 for folder in CHECKED for _ in (ROOT / folder).rglob("*.py"))
    assert f"no issues found in {modules} source files" in done.stdout, done.stdout
