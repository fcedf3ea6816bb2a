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
    assert spec_part == render_reference(), "docs/reference.md drifted: run `python -m controller.settings_doc --write`"
    assert settings_part.startswith(f"\n{reference.SETTINGS_MARKER}\n"), "the operator's settings end the page"


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
