"""`streamq checkpoint inspect` on a checkpoint written by hand (Spark's own are in the integration tests)."""

import json
import os

import pytest
from typer.testing import CliRunner

from app.cli.commands import cli

pytestmark = pytest.mark.unit


def _checkpoint(root):
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "metadata").write_text('{"id":"3f0c"}')
    for batch, (a, b) in enumerate([(10, 4), (20, 9), (30, 12)]):
        (root / "offsets" / str(batch)).write_text(f'v1\n{{}}\n{{"payments":{{"0":{a},"1":{b}}}}}\n')
    for batch in (0, 1):
        (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    (root / "commits" / ".2.tmp").write_text("v")
    return root


def test_json_output(tmp_path):
    result = CliRunner().invoke(cli, ["checkpoint", "inspect", str(_checkpoint(tmp_path / "ck")), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["queryId"] == "3f0c" and report["lastCommitted"] == 1 and report["inFlight"] == 2
    assert report["committedOffsets"] == [{"payments": {"0": 20, "1": 9}}]
    assert report["inFlightOffsets"] == [{"payments": {"0": 30, "1": 12}}]
    assert report["lastCommitAgeSeconds"] >= 0 and report["committedAt"].endswith("Z")
    assert report["holds"] == {"sourceKinds": ["kafka"], "topics": ["payments"], "statefulOperators": []}


def test_tables(tmp_path):
    ck = _checkpoint(tmp_path / "ck")
    os.utime(ck / "commits" / "1", (0, 0))
    result = CliRunner().invoke(cli, ["checkpoint", "inspect", str(ck)], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert "last committed" in result.output and "1 (" in result.output and "h ago" in result.output
    rows = [line for line in result.output.splitlines() if "payments" in line]
    assert len(rows) == 2 and "20" in rows[0] and "30" in rows[0] and "9" in rows[1] and "12" in rows[1]


def test_a_missing_checkpoint(tmp_path):
    result = CliRunner().invoke(cli, ["checkpoint", "inspect", str(tmp_path / "none"), "--json"])
    assert result.exit_code == 69 and json.loads(result.output)["exists"] is False


@pytest.mark.parametrize("contents", [{}, {"README.md": "# docs\n", "guide/intro.md": "text\n"}], ids=["empty", "docs"])
def test_a_directory_that_is_not_a_checkpoint_is_said_so_and_fails(tmp_path, contents):
    """Issue 38: an empty folder, or docs/, said `resumable: yes` with exit 0."""
    folder = tmp_path / "folder"
    folder.mkdir()
    for name, text in contents.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    result = CliRunner().invoke(cli, ["checkpoint", "inspect", str(folder), "--json"])
    assert result.exit_code == 69, result.output
    report = json.loads(result.stdout)
    assert report["exists"] is True and report["checkpoint"] is False and report["resumable"] is False
    assert "not a checkpoint" in result.stderr
    tables = CliRunner().invoke(cli, ["checkpoint", "inspect", str(folder)], env={"COLUMNS": "160"})
    assert tables.exit_code == 69 and "resumable" in tables.stdout and "yes" not in tables.stdout


def test_a_checkpoint_that_only_started_is_one(tmp_path):
    """Spark writes metadata when the query starts, before its first batch: that is a checkpoint."""
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "metadata").write_text('{"id":"3f0c"}')
    result = CliRunner().invoke(cli, ["checkpoint", "inspect", str(tmp_path / "ck"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["checkpoint"] is True
