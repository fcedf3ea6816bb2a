import io
import json
from types import SimpleNamespace

import pytest

from app.pipeline.progress import ProgressSink, record_from_progress

pytestmark = pytest.mark.unit


def test_listener_progress_becomes_one_record():
    progress = SimpleNamespace(
        batchId=7,
        sources=[SimpleNamespace(endOffset='{"payments":{"0":120,"1":80}}')],
        numInputRows=200,
        inputRowsPerSecond=float("nan"),
        processedRowsPerSecond=1234.5678,
    )
    record = record_from_progress("fraud", "microBatch", progress)
    assert record["batchId"] == 7
    assert record["committedOffsets"] == {"payments": {"0": 120, "1": 80}}
    assert record["inputRowsPerSecond"] is None  # NaN is not JSON
    assert record["processedRowsPerSecond"] == 1234.568


def test_sink_writes_a_line_per_record_and_keeps_the_latest(tmp_path):
    stream = io.StringIO()
    sink = ProgressSink(str(tmp_path / "progress.json"), stream)
    sink.emit({"batchId": 1})
    sink.emit({"batchId": 2})
    assert [json.loads(line)["batchId"] for line in stream.getvalue().splitlines()] == [1, 2]
    assert json.loads((tmp_path / "progress.json").read_text()) == {"batchId": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["progress.json"]  # no temp files left
