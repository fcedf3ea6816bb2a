"""Figures from the consumer's rows (bench/latency_clients.py): one window, then the repetitions of a cell.

A window is a range of sequence numbers (the records *due* in it). Latency is
receive - due. Every window keeps an HDR histogram (microseconds, 3 significant
digits, base64) so plots and tables are redrawn from the results file alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from devtools.payments import percentile

QUANTILES = {"p50": 50, "p90": 90, "p99": 99, "p99.9": 99.9, "max": 100}
HDR_MAX_US = 3_600_000_000  # an hour: nothing a window holds is slower


def hdr_encode(latency_us) -> str:
    from hdrh.histogram import HdrHistogram

    h = HdrHistogram(1, HDR_MAX_US, 3)
    for v in latency_us:
        h.record_value(int(min(max(v, 1), HDR_MAX_US)))
    return h.encode().decode("ascii")


def hdr_decode(encoded: str):
    from hdrh.histogram import HdrHistogram

    return HdrHistogram.decode(encoded.encode("ascii"))


def hdr_percentiles_ms(encoded: str, quantiles: Sequence[float]) -> list[float]:
    h = hdr_decode(encoded)
    return [h.get_value_at_percentile(q) / 1000 for q in quantiles]


def _pcts(sorted_ms) -> dict[str, float | None]:
    return {
        k: (round(float(percentile(sorted_ms, q, presorted=True)), 3) if len(sorted_ms) else None) for k, q in QUANTILES.items()
    }


def window(data, first: int, last: int, passes, *, expected_rate: float | None = None, by_second: bool = False) -> dict[str, Any]:
    """The records due in [first, last) that passed the filter: latency, its split, losses, duplicates."""
    import numpy as np

    rows = data[(data[:, 0] >= first) & (data[:, 0] < last)]
    _, first_index, counts = np.unique(rows[:, 0], return_index=True, return_counts=True)
    once = rows[np.sort(first_index)]
    expected = sum(1 for s in range(first, last) if passes(s))
    due_ms, recv_ms = once[:, 1] / 1e6, once[:, 2] / 1e6
    sink_ms, source_ms = once[:, 3].astype(float), once[:, 4].astype(float)
    latency_ms = np.sort(recv_ms - due_ms)
    out: dict[str, Any] = {
        "records": [int(first), int(last)],
        "expected": expected,
        "received": int(len(once)),
        "duplicates": int((counts - 1).sum()),
        "deliveredFraction": round(len(once) / expected, 5) if expected else 0.0,
        "latencyMs": _pcts(latency_ms),
        "meanMs": round(float(latency_ms.mean()), 3) if len(latency_ms) else None,
        # Where the time went (ms clocks of the broker and the sink producer, so ~1 ms resolution):
        "splitMs": {
            "dueToSourceAppend": _pcts(np.sort(source_ms - due_ms)),
            "sourceAppendToSinkSend": _pcts(np.sort(sink_ms - source_ms)),
            "sinkSendToReceive": _pcts(np.sort(recv_ms - sink_ms)),
        },
        "hdrUs": hdr_encode((latency_ms * 1000).astype(np.int64)) if len(latency_ms) else None,
    }
    if len(once):
        out["boundaryMs"] = by_boundary(due_ms, source_ms, sink_ms, recv_ms)
    if len(once) > 1:
        span_s = (once[:, 2].max() - once[:, 2].min()) / 1e9 or 1e-9
        out["outRate"] = round(len(once) / span_s)
        by_due = once[np.argsort(once[:, 1])]
        half = len(by_due) // 2
        lat = (by_due[:, 2] - by_due[:, 1]) / 1e6
        out["halvesP50Ms"] = [round(float(percentile(np.sort(part), 50, presorted=True)), 3) for part in (lat[:half], lat[half:])]
    if expected_rate:
        out["expectedOutRate"] = round(expected_rate)
    if by_second and len(once):
        # p99 of each second of the window (by due time): when, after a start, the tail settles.
        second = (once[:, 1] - once[:, 1].min()) // 1_000_000_000
        out["p99BySecondMs"] = [round(float(percentile(np.sort(once[second == i, 2] - once[second == i, 1]) / 1e6, 99, presorted=True)), 1)
                                for i in range(int(second.max()) + 1) if (second == i).any()]  # fmt: skip
    return out


# A continuous query's epochs end on whole seconds of the wall clock (Spark's ProcessingTimeExecutor
# aligns its triggers to multiples of the interval): a record due in the first fifth of a second
# meets the epoch boundary, the rest do not. The same split of a path without epochs (Flink with
# checkpoints off) is the control: there the two should match.
BOUNDARY_MS = 200


def by_boundary(due_ms, source_ms, sink_ms, recv_ms) -> dict[str, Any]:
    """p99 of the whole latency and of each leg for records due in the first ``BOUNDARY_MS`` of a
    second against the rest, and the share of the slowest 1 % due in that first part (a fifth of the
    records are: 0.2 is no effect)."""
    import numpy as np

    near = (due_ms % 1000) < BOUNDARY_MS
    legs = {"total": recv_ms - due_ms, "dueToSourceAppend": source_ms - due_ms,
            "sourceAppendToSinkSend": sink_ms - source_ms, "sinkSendToReceive": recv_ms - sink_ms}  # fmt: skip

    def p99(values) -> float | None:
        return round(float(percentile(np.sort(values), 99, presorted=True)), 3) if len(values) else None

    total = legs["total"]
    slow = total >= percentile(np.sort(total), 99, presorted=True)
    return {
        "firstMs": BOUNDARY_MS,
        "p99First": {leg: p99(v[near]) for leg, v in legs.items()},
        "p99Rest": {leg: p99(v[~near]) for leg, v in legs.items()},
        "slowest1pctShareFirst": round(float(near[slow].mean()), 3),
        "slowest1pctShareFirstByLeg": {
            leg: round(float(near[v >= percentile(np.sort(v), 99, presorted=True)].mean()), 3)
            for leg, v in legs.items()
            if leg != "total"
        },
    }


def keeps_up(w: dict[str, Any]) -> tuple[bool, str]:
    """Every record arrived, and the median did not run away from the first half of the window to the second."""
    reasons = []
    if w["deliveredFraction"] < 0.999:
        reasons.append(f"{w['deliveredFraction']:.2%} delivered")
    halves = w.get("halvesP50Ms")
    if halves and halves[1] > 2 * halves[0] + 50:
        reasons.append(f"latency growing (p50 {halves[0]:.0f} -> {halves[1]:.0f} ms)")
    return not reasons, "; ".join(reasons)


def over_repetitions(windows: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and range of each percentile over the repetitions of one cell (each repetition a fresh job)."""
    out: dict[str, Any] = {"repetitions": len(windows)}
    for key in QUANTILES:
        values = [w["latencyMs"][key] for w in windows if w and w["latencyMs"][key] is not None]
        if values:
            out[key] = {"median": round(percentile(values, 50), 3), "min": min(values), "max": max(values)}
    for part in ("dueToSourceAppend", "sourceAppendToSinkSend", "sinkSendToReceive"):
        values = [w["splitMs"][part]["p50"] for w in windows if w and w["splitMs"][part]["p50"] is not None]
        if values:
            out.setdefault("splitP50Ms", {})[part] = round(percentile(values, 50), 3)
    out["lost"] = sum(w["expected"] - w["received"] for w in windows if w)
    out["duplicates"] = sum(w["duplicates"] for w in windows if w)
    return out
