"""The engine's leg split at streamq's reader (bench.reader_trace): the trace file's rows, the join with
the sink's records, and where the slowest records' milliseconds are."""

from __future__ import annotations

import struct

import pytest

from bench import reader_trace

pytestmark = pytest.mark.unit


def test_rows_as_the_reader_writes_them_join_the_sinks_records_by_source_position(tmp_path):
    path = tmp_path / "trace.bin"
    # partition, offset, appendMs, polledUs, handedUs, polledCount: big-endian longs (DataOutputStream)
    rows = [
        (0, 7, 1_000, 1_004_000, 1_004_500, 1),
        (1, 3, 1_010, 1_012_000, 1_012_250, 2),
        (1, 4, 1_010, 1_012_000, 1_013_000, 2),
    ]
    path.write_bytes(b"".join(struct.pack(">6q", *r) for r in rows) + b"\x00\x01")  # a torn last row
    trace = reader_trace.read_trace(path)
    assert trace[(1, 4)] == (1_010, 1_012_000, 1_013_000, 2)
    sent = [((0, 7), 1_020), ((1, 3), 1_013), ((1, 4), 1_040), ((5, 5), 1_050)]  # (5, 5): not traced
    by_leg = reader_trace.legs(trace, sent, (1_000_000, 1_012_900))  # (1, 4) was handed after the window
    assert by_leg["engine"] == [20.0, 3.0]
    assert by_leg["fetch"] == [4.0, 2.0]
    assert by_leg["inReader"] == [0.5, 0.25]
    assert by_leg["afterHandOff"] == [15.5, 0.75]
    assert by_leg["phaseMs"] == [4.0, 12.0]  # the millisecond of the second each was handed over in
    # every leg adds up to the engine's
    for i in range(2):
        assert by_leg["fetch"][i] + by_leg["inReader"][i] + by_leg["afterHandOff"][i] == pytest.approx(by_leg["engine"][i])


def test_the_tail_is_told_by_the_slowest_records_legs_not_each_legs_own_tail():
    engine = [float(v) for v in range(1, 201)]
    by_leg = {"engine": engine, "fetch": [1.0] * 200, "inReader": [0.0] * 200, "afterHandOff": [v - 1 for v in engine],
              "phaseMs": [float(i * 5 % 1000) for i in range(200)]}  # fmt: skip
    result = reader_trace.summary(by_leg)
    assert result["slowestPercentByPhase"] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 2]  # handed at 990 and 995 ms
    assert result["afterHandOffP99ByPhase"][0] == 19.0  # phases 0-95 ms: records 1-20, after the hand-off 0-19 ms
    assert result["records"] == 200
    assert result["engine"]["p99"] == 198.0
    assert result["slowestPercent"] == {"engine": 199.5, "fetch": 1.0, "inReader": 0.0, "afterHandOff": 198.5, "records": 2}


def test_the_source_position_is_read_from_the_trace_select_output():
    value = b'{"inTs":1700000000000,"inPart":3,"inOff":41,"id":9,"amount":5,"sentNs":12}'
    assert reader_trace.source_position(value) == (3, 41)
    assert reader_trace.source_position(b'{"inTs":1,"id":9}') is None
    assert "inPart" in reader_trace.TRACE_SELECT[1] and "offset" in reader_trace.TRACE_SELECT[1]
