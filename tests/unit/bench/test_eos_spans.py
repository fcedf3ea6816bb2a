"""bench.eos_spans: the exactly-once sink's spans summed up per kind of producer."""

import json

import pytest

from bench import eos_spans

pytestmark = pytest.mark.unit


def _writer(batch, kind, **steps):
    return {"side": "writer", "batch": batch, "writer": 0, "producer": kind, "skipped": False, **steps}


def test_steps_per_kind_and_the_part_no_writer_accounts_for():
    lines = [
        _writer(0, "new", firstRow=0.01, init=0.5, marker=0.02, begin=0.001, produce=0.05, commit=0.02),
        {"side": "driver", "batch": 0, "foreachBatch": 1.0},
        _writer(1, "kept", firstRow=0.01, begin=0.01, produce=0.05, commit=0.02),
        {**_writer(1, "kept", firstRow=0.02), "skipped": True},
        {"side": "driver", "batch": 1, "foreachBatch": 0.3},
    ]
    summary = eos_spans.summarize(lines)
    assert summary["batches"] == 2
    assert summary["writers"]["new"]["init"] == {"p50": 500.0, "p99": 500.0}
    assert summary["writers"]["kept"]["init"] == {"p50": None, "p99": None}  # a kept producer skips it
    assert summary["writers"]["kept"]["writers"] == 1 and summary["writers"]["skipped"]["writers"] == 1
    # batch 0: 1.0 s, its writer 0.601 s; batch 1: 0.3 s, its slowest writer 0.09 s
    assert summary["sparkMs"] == {"p50": 210.0, "p99": 399.0}
    assert summary["foreachBatchMs"] == {"p50": 300.0, "p99": 1000.0}


def test_a_line_cut_short_is_left_out(tmp_path):
    spans = tmp_path / "spans.jsonl"
    spans.write_text(json.dumps({"side": "driver", "batch": 0, "foreachBatch": 0.2}) + "\n" + '{"side": "wri')
    assert eos_spans.read(spans) == [{"side": "driver", "batch": 0, "foreachBatch": 0.2}]
