from pathlib import Path

import pytest

from app.contract.spec import QuerySpec
from app.contract.reference import render_reference

pytestmark = pytest.mark.unit

PAGE = Path(__file__).resolve().parents[3] / "docs" / "reference.md"


def test_committed_reference_matches_the_model():
    assert PAGE.read_text() == render_reference(), "docs/reference.md drifted: run `python -m app.contract.reference > docs/reference.md`"


def test_every_spec_field_is_documented():
    page = render_reference()
    for name in QuerySpec.model_fields:
        assert f"| `{QuerySpec.model_fields[name].alias}` |" in page
    assert "## Trigger (*one of*)" in page and "`continuous`" in page
