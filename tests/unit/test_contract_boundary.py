"""The contract package is the only thing job and operator share, and it carries no Spark.

The layers are import-linter contracts in pyproject.toml ([tool.importlinter]); this runs them.
"""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
CONTRACTS = {
    "contract-is-standalone",
    "operator-and-job-apart",
    "job-layers",
    "contract-checks-layers",
    "product-without-harness",
    "bench-does-not-use-tests",
    "testbed-is-below-its-users",
    "decide-is-pure",
    "render-is-pure",
}


def test_the_layers_are_all_declared():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert {contract["id"] for contract in declared} == CONTRACTS


def test_the_import_contracts_are_kept():
    """The picture of docs/architecture.md: the job's layers, the operator on the contract, the harness apart."""
    assert LINT_IMPORTS.is_file(), f"{LINT_IMPORTS} is missing: pip install -e '.[dev]'"
    done = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in done.stdout, done.stdout[-2000:]


def test_every_contract_module_imports_with_spark_unavailable():
    """Run in a fresh interpreter where importing pyspark fails, as in the operator's image."""
    modules = sorted(f"contract.{p.stem}" for p in (ROOT / "contract").glob("*.py") if p.stem != "__init__")
    code = (
        "import sys; sys.modules['pyspark'] = None; sys.modules['py4j'] = None\n"
        f"import importlib\nfor m in {modules!r}: importlib.import_module(m)\n"
        "import controller.handlers, controller.crd\n"
        "print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_the_architecture_picture_names_the_parts_of_app():
    """docs/architecture.md's table lists app/'s folders, no more, no fewer."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    listed = set(re.findall(r"^\| `app/(\w+)/` \|", text, re.M))
    folders = {p.name for p in (ROOT / "app").iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert listed == folders
    picture = text[text.index("```") : text.index("```", text.index("```") + 3)]
    for folder in folders | {"controller", "testbed", "devtools", "bench", "tests"}:
        assert f"{folder}/" in picture, f"{folder}/ is missing from the picture"
