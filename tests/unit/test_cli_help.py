"""Every command line's --help says what to type, not Python's types (issue 38: `<list[Path]>`, `<bool>`)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
# The console script (pyproject's [project.scripts] streamq = app.cli:main) and the operator's command lines.
HELP = [
    ["app", "--help"],
    ["app", "run", "--help"],
    ["app", "validate", "--help"],
    ["app", "checkpoint", "--help"],
    ["app", "checkpoint", "inspect", "--help"],
    ["controller", "--help"],
    ["controller", "release-finalizers", "--help"],
    ["controller.crd", "--help"],
    ["devtools", "--help"],
]
PYTHON_TYPE = re.compile(r"<(list\[|bool|str|int|float|path|Path)\b")
ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}  # wide: one row per parameter


@pytest.mark.parametrize("command", HELP, ids=" ".join)
def test_help_shows_no_python_types(command):
    out = subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env=ENV)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "Usage:" in out.stdout
    assert not PYTHON_TYPE.search(out.stdout), out.stdout


def test_the_help_names_values_and_leaves_flags_bare():
    out = subprocess.run([sys.executable, "-m", "app", "validate", "--help"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, env=ENV)  # fmt: skip
    rows = {line.split()[1]: line for line in out.stdout.splitlines() if line.startswith("│") and len(line.split()) > 2}
    assert "VALUES_FILE" in rows["--policy"] and "NAME" in rows["--release"]
    assert rows["--spark"].split()[2] == "Also"  # the help text follows the flag: no type between
    assert "validate [OPTIONS] {PATH}..." in out.stdout
