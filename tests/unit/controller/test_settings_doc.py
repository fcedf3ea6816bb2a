"""docs/reference.md's "Operator settings": every STREAMQ_* variable of controller/config.py with
its default, the chart value that sets it and a description, generated (issue #38)."""

import re
from pathlib import Path

import pytest
import yaml

from contract import reference
from controller import settings_doc

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "streamq"
DEPLOYMENT = (CHART / "templates" / "deployment.yaml").read_text()
HELPERS = (CHART / "templates" / "_helpers.tpl").read_text()
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
# Set from a value without naming it in their env entry: a file the `policy` ConfigMap is
# mounted as, and the pod's own serviceAccountName (the chart names it from serviceAccount.name).
INDIRECT = {"STREAMQ_POLICY_FILE", "STREAMQ_OPERATOR_SERVICE_ACCOUNT"}


def env_entry(variable: str) -> str:
    """The Deployment's env entry of the variable, up to the next entry ("" when it sets none)."""
    found = re.search(rf"- name: {variable}\b(.*?)(?=\n\s*- name: |\Z)", DEPLOYMENT, re.S)
    return found[1] if found else ""


def chart_values(field) -> list[str]:
    """The value paths a chart note names in backticks (`jobs.imagePullPolicy`)."""
    return re.findall(r"`([\w.]+)`", settings_doc.extra(field).get("chart", ""))


def test_committed_page_matches_the_settings():
    assert (ROOT / "docs" / "reference.md").read_text() == settings_doc.render_page(), (
        "docs/reference.md drifted: run `python -m controller.settings_doc --write`"
    )


def test_every_variable_has_a_description():
    variables = settings_doc.variables()
    bare = [variable for variable, field in variables.items() if not (field.description or "").strip()]
    assert not bare, f"controller/config.py: add Field(description=...) to {', '.join(bare)}"
    assert "STREAMQ_POLICY_FILE" in variables and "STREAMQ_JOB_IMAGE" in variables
    page = settings_doc.render_settings()
    for variable in variables:
        assert f"| `{variable}` |" in page


def test_the_chart_value_of_each_variable_is_the_one_that_sets_it():
    for variable, field in settings_doc.variables().items():
        entry = env_entry(variable)
        note = settings_doc.extra(field).get("chart")
        assert bool(entry) == bool(note), (
            f"{variable}: the chart {'sets' if entry else 'does not set'} it; its chart note says {note!r}"
        )
        for path in chart_values(field):
            node = VALUES
            for key in path.split("."):
                assert isinstance(node, dict) and key in node, f"{variable}: no value {path} in values.yaml"
                node = node[key]
            helpers = re.findall(r'include "([\w.]+)"', entry)
            bodies = [re.search(rf'define "{re.escape(h)}".*?end', HELPERS, re.S)[0] for h in helpers]
            assert (
                variable in INDIRECT
                or any(f".Values.{path}" in text for text in (entry, *bodies))
                or (
                    re.search(rf"with \$?\.Values\.{re.escape(path.rsplit('.', 1)[0])}\b", DEPLOYMENT)
                    and f".{path.rsplit('.', 1)[1]}" in entry
                )
            ), f"{variable}: its entry in deployment.yaml does not read .Values.{path}"


def test_check_mode_reports_drift(tmp_path, monkeypatch, capsys):
    page = tmp_path / "reference.md"
    page.write_text(reference.render_reference())
    monkeypatch.setattr(reference, "PAGE", page)
    assert settings_doc.main(["--check"]) == 1
    assert "python -m controller.settings_doc --write" in capsys.readouterr().err
    assert settings_doc.main(["--write"]) == 0 and page.read_text() == settings_doc.render_page()
    assert settings_doc.main(["--check"]) == 0


def test_write_and_check_exclude_each_other(capsys):
    with pytest.raises(SystemExit) as exc:
        settings_doc.main(["--check", "--write"])
    assert exc.value.code == 2
    assert "use either --write or --check" in capsys.readouterr().err
