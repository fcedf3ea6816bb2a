"""The latency benchmark's method: due-time latency, the split, repetitions, and the targets the report computes."""

import numpy as np
import pytest

from bench import report
from bench.latency_clients import parse_value, passes, value_of
from bench.latency_stats import hdr_percentiles_ms, keeps_up, over_repetitions, window

pytestmark = pytest.mark.unit

MS = 1_000_000


def rows(latencies_ms, *, first=0, due0=10_000 * MS, spark_ms=2, broker_ms=1, apart_ns=100_000):
    """Consumer rows for records due apart_ns apart, each arriving latencies_ms[i] after it was due."""
    out = []
    for i, lat in enumerate(latencies_ms):
        due = due0 + i * apart_ns
        source_append = due // MS + broker_ms
        out.append([first + i, due, due + int(lat * MS), source_append + spark_ms, source_append])
    return np.array(out, dtype=np.int64)


def test_an_output_value_parses_whatever_the_field_order():
    spark = b'{"inTs":1700000000123,' + value_of(7, 42)[1:]
    flink = b'{"id":7,"amount":1500,"inTs":1700000000123,"sentNs":42}'
    assert parse_value(spark) == parse_value(flink) == (7, 42, 1700000000123)
    assert parse_value(value_of(7, 42)) == (7, 42, -1)  # the baseline reads its input: no inTs


def test_latency_is_receive_minus_due_and_late_records_count():
    data = rows([1.0] * 98 + [250.0, 250.0])  # a stall: two records 250 ms late
    w = window(data, 0, 100, lambda s: True)
    assert w["latencyMs"]["p50"] == pytest.approx(1.0)
    assert w["latencyMs"]["p99"] == pytest.approx(250.0)
    assert w["received"] == w["expected"] == 100 and w["duplicates"] == 0


def test_the_split_adds_up_to_the_latency():
    # whole milliseconds apart: the broker's and the sink producer's clocks have ms resolution
    w = window(rows([10.0] * 50, spark_ms=6, broker_ms=1, apart_ns=MS), 0, 50, lambda s: True)
    split = w["splitMs"]
    assert split["dueToSourceAppend"]["p50"] == pytest.approx(1.0)
    assert split["sourceAppendToSinkSend"]["p50"] == pytest.approx(6.0)
    assert split["sinkSendToReceive"]["p50"] == pytest.approx(3.0)


def test_filtered_records_are_not_expected_and_missing_ones_are_lost():
    data = rows([2.0] * 30)
    kept = data[[passes(int(s)) for s in data[:, 0]]][:-1]  # the filter's survivors, one of them lost
    w = window(np.vstack([kept, kept[:2]]), 0, 30, passes)  # two arrive twice
    assert w["expected"] == 27 and w["received"] == 26 and w["duplicates"] == 2
    ok, why = keeps_up(w)
    assert not ok and "delivered" in why


def test_the_histogram_redraws_the_percentiles():
    w = window(rows(list(np.linspace(1, 100, 1000))), 0, 1000, lambda s: True)
    p50, p99 = hdr_percentiles_ms(w["hdrUs"], [50, 99])
    assert p50 == pytest.approx(w["latencyMs"]["p50"], rel=0.01)
    assert p99 == pytest.approx(w["latencyMs"]["p99"], rel=0.01)


def test_repetitions_report_the_median_and_the_range():
    reps = [window(rows([lat] * 10), 0, 10, lambda s: True) for lat in (3.0, 9.0, 4.0)]
    summary = over_repetitions(reps)
    assert summary["p99"] == {"median": 4.0, "min": 3.0, "max": 9.0}
    assert summary["repetitions"] == 3 and summary["lost"] == 0


def cell(p50, p99):
    return {"measured": {"p50": {"median": p50}, "p99": {"median": p99}}}


def test_the_targets_are_computed_from_the_cells():
    cells = {"baseline": {"10000": cell(1.0, 10.0)}, "realTime": {"10000": cell(2.5, 19.0)},
             "continuous": {"10000": cell(20.0, 200.0)}, "microBatch": {"10000": cell(900.0, 2000.0)},
             "flink": {"10000": cell(2.0, 9.5)}}  # fmt: skip
    text = report.targets({"cells": cells})
    assert "fastest streamq path by p99 is `realTime`" in text
    assert "p50 2.5 ms against floor p50 + 2 = 3.0 ms (**met**)" in text
    assert "p99 19.0 ms against 2 x floor p99 = 20.0 ms (**met**)" in text
    assert "continuous p99 200.0 ms = 20.0 x floor p99 (target 5 x: **not met**)" in text
    assert "= 105 x the fastest path's p99 (target >= 20 x: **met**)" in text
    assert "2.00 x Flink's" in text


def test_a_real_time_window_holds_whole_batches_and_at_least_two():
    from bench.latency import PATHS, measured_seconds

    assert measured_seconds(PATHS["realTime"], 12) == 15  # 5 s batches: 3 whole, not 2.4
    assert measured_seconds(PATHS["realTime30s"], 12) == 60  # 30 s batches: two boundaries, wherever it falls
    assert measured_seconds(PATHS["continuous"], 12) == 12
    assert measured_seconds(PATHS["continuousStreamq"], 12) == 12  # the same trigger, streamq's reader
    assert measured_seconds(PATHS["microBatch"], 12) == 12
    assert measured_seconds(PATHS["baseline"], 12) == measured_seconds(PATHS["flink"], 12) == 12


def test_the_report_names_the_stretched_windows():
    from bench.report import measured_windows

    steps = lambda s: [{"rate": 1000, "measuredS": s}, {"rate": 10000, "measuredS": s}]  # noqa: E731
    r = {
        "settings": {"measure": 12.0},
        "runs": [{"path": "continuous", "steps": steps(12.0)}, {"path": "realTime30s", "steps": steps(60.0)}],
    }
    assert measured_windows(r) == "12 s (realTime30s 60 s: whole batches, at least two)"
    assert measured_windows({"settings": {"measure": 12.0}, "runs": [{"path": "baseline", "steps": [{"rate": 1}]}]}) == "12 s"


def test_the_one_percentile_takes_a_sorted_numpy_array_as_it_is():
    import numpy as np

    from devtools.payments import percentile

    values = np.arange(1, 1001, dtype=float)
    assert percentile(values, 99, presorted=True) == 990.0 == percentile(list(values[::-1]), 99)
    assert percentile(values, 100, presorted=True) == 1000.0 and percentile(values, 0, presorted=True) == 1.0
    assert percentile(np.array([]), 50, presorted=True) is None


def test_every_figure_of_a_window_is_the_one_percentile_never_an_interpolation():
    # 1..100 ms: numpy's interpolating p99 would be 99.01 ms and its median of the halves 25.5 and 75.5 ms.
    w = window(rows(list(range(1, 101))), 0, 100, lambda s: True, by_second=True)
    assert w["latencyMs"]["p99"] == pytest.approx(99.0)
    assert w["p99BySecondMs"] == [99.0]
    assert w["halvesP50Ms"] == [25.0, 75.0]


def test_the_median_of_an_even_number_of_repetitions_is_the_lower_middle_one():
    reps = [window(rows([lat] * 10), 0, 10, lambda s: True) for lat in (3.0, 9.0, 4.0, 8.0)]
    assert over_repetitions(reps)["p50"] == {"median": 4.0, "min": 3.0, "max": 9.0}


def test_the_boundary_split_finds_a_stall_in_the_first_fifth_of_each_second_and_in_which_leg():
    # 2,000 records 1 ms apart over 2 s: those due 0-50 ms into a second wait 30 ms inside the engine
    data = rows([1.0] * 2000, apart_ns=MS, due0=10_000 * 1000 * MS)
    stalled = (data[:, 1] // MS) % 1000 < 50
    data[stalled, 3] += 30  # sink send 30 ms later
    data[stalled, 2] += 30 * MS  # so received 30 ms later
    b = window(data, 0, 2000, lambda s: True)["boundaryMs"]
    assert b["p99First"]["total"] == pytest.approx(31.0, abs=0.5) and b["p99Rest"]["total"] == pytest.approx(1.0, abs=0.5)
    assert b["p99First"]["sourceAppendToSinkSend"] > 30 > b["p99Rest"]["sourceAppendToSinkSend"]
    assert b["p99First"]["dueToSourceAppend"] == b["p99Rest"]["dueToSourceAppend"]  # the input leg is untouched
    assert b["slowest1pctShareFirst"] == 1.0
    assert b["slowest1pctShareFirstByLeg"]["sourceAppendToSinkSend"] == 1.0


def test_without_a_boundary_effect_the_first_fifth_holds_a_fifth_of_the_slowest():
    rng = np.random.default_rng(7)
    data = rows(list(rng.exponential(2.0, 10_000)), apart_ns=MS, due0=10_000 * 1000 * MS)
    b = window(data, 0, 10_000, lambda s: True)["boundaryMs"]
    assert 0.1 < b["slowest1pctShareFirst"] < 0.3
