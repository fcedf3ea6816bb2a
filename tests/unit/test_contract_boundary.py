"""The contract package is the only thing job and operator share, and it carries no Spark."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_the_operator_imports_only_the_contract_from_the_job():
    offenders = {
        f"{path.relative_to(ROOT)}: {module}"
        for path in (ROOT / "controller").rglob("*.py")
        for module in _imported_modules(path)
        if (module == "app" or module.startswith("app.")) and not module.startswith("app.contract")
    }
    assert not offenders, sorted(offenders)


def test_the_contract_imports_nothing_of_the_job_but_itself():
    offenders = {
        f"{path.relative_to(ROOT)}: {module}"
        for path in (ROOT / "app" / "contract").rglob("*.py")
        for module in _imported_modules(path)
        if module.startswith(("app.", "controller", "pyspark", "py4j")) and not module.startswith("app.contract")
    }
    assert not offenders, sorted(offenders)


def test_every_contract_module_imports_with_spark_unavailable():
    """Run in a fresh interpreter where importing pyspark fails, as in the operator's image."""
    modules = sorted(f"app.contract.{p.stem}" for p in (ROOT / "app" / "contract").glob("*.py") if p.stem != "__init__")
    code = (
        "import sys; sys.modules['pyspark'] = None; sys.modules['py4j'] = None\n"
        f"import importlib\nfor m in {modules!r}: importlib.import_module(m)\n"
        "import controller.handlers, controller.crd\n"
        "print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
