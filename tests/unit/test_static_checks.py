"""ruff's lint and format over the whole checkout, in the unit tier.

What is checked and how is [tool.ruff] in pyproject.toml (rules, line length, what is left out);
these run ruff from the repository root as a developer would. A failure shows ruff's own output.
To fix one: `.venv/bin/ruff format . && .venv/bin/ruff check --fix .`, then read what is left.
"""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
RUFF = Path(sys.executable).parent / "ruff"
HOW_TO_FIX = "fix with: .venv/bin/ruff format . && .venv/bin/ruff check --fix ."
# Every Python folder of the checkout: a config that excluded one would pass without looking at it.
CHECKED_FOLDERS = {"contract", "app", "controller", "testbed", "tests", "bench", "devtools", "hack"}


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    assert RUFF.is_file(), f"{RUFF} is missing: pip install -e '.[dev]'"
    # --no-cache: the answer is about the files as they are, not about an earlier run
    return subprocess.run([str(RUFF), *args, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_looks_at_every_python_folder():
    done = ruff("check", "--show-files", ".")
    assert done.returncode == 0, done.stdout + done.stderr
    seen = {Path(line).relative_to(ROOT).parts[0] for line in done.stdout.splitlines() if line.endswith(".py")}
    assert CHECKED_FOLDERS <= seen, f"ruff checks no file in {sorted(CHECKED_FOLDERS - seen)}: see [tool.ruff] exclude"


def test_ruff_check_finds_nothing():
    done = ruff("check", "--output-format", "concise", ".")
    if done.returncode != 0:
        pytest.fail(f"ruff check:\n{done.stdout}{done.stderr}\n{HOW_TO_FIX}", pytrace=False)


def test_the_tree_is_formatted_as_ruff_formats_it():
    done = ruff("format", "--check", ".")
    if done.returncode != 0:
        pytest.fail(f"ruff format --check:\n{done.stdout}{done.stderr}\n{HOW_TO_FIX}", pytrace=False)
