import re
from pathlib import Path

import pytest

from contract import reference
from contract.reference import render_reference
from contract.spec import QuerySpec

pytestmark = pytest.mark.unit

PAGE = Path(__file__).resolve().parents[3] / "docs" / "reference.md"


def test_committed_reference_matches_the_model():
    """The spec's part; the operator's settings after it are tests/unit/controller/test_settings_doc.py's."""
    spec_part, settings_part = reference.split_page(PAGE.read_text())
    assert spec_part == render_reference(), "docs/reference.md drifted: run `python -m contract.reference --write`"
    assert settings_part.startswith(f"\n{reference.SETTINGS_MARKER}\n"), "the operator's settings end the page"


def test_write_keeps_the_operators_settings(tmp_path, monkeypatch):
    """contract cannot render the operator's part (it may not import controller): it keeps it."""
    page = tmp_path / "reference.md"
    tail = f"\n{reference.SETTINGS_MARKER}\n\n## Operator settings\n"
    page.write_text("old\n" + tail)
    monkeypatch.setattr(reference, "PAGE", page)
    assert reference.main(["--check"]) == 1
    assert reference.main(["--write"]) == 0 and page.read_text() == render_reference() + tail
    assert reference.main(["--check"]) == 0


def test_every_spec_field_is_documented():
    page = render_reference()
    for name in QuerySpec.model_fields:
        assert f"| `{QuerySpec.model_fields[name].alias}` |" in page
    assert "## Trigger (*one of*)" in page and "`continuous`" in page


def test_every_row_has_a_description():
    """The table says what kubectl explain says: no field goes without a text."""
    rows = [line for line in render_reference().splitlines() if line.startswith("| `")]
    bare = [row.split("|")[1].strip() for row in rows if re.search(r"\|\s*\|\s*$", row)]
    assert len(rows) > 50 and not bare, f"fields without a description: {', '.join(bare)}"


def test_check_mode_reports_drift(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "reference.md"
    stale.write_text("old\n")
    monkeypatch.setattr(reference, "PAGE", stale)
    assert reference.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert reference.main(["--write"]) == 0 and stale.read_text() == render_reference()
    assert reference.main(["--check"]) == 0


def test_write_and_check_exclude_each_other(capsys):
    for argv in (["--write", "--check"], ["--bogus"]):
        with pytest.raises(SystemExit) as exc:
            reference.main(argv)
        assert exc.value.code == 2, argv
    assert "use either --write or --check" in capsys.readouterr().err
