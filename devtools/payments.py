"""The payments `make dev` feeds its broker, and how flagged ones are shown: pure functions."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import TypeVar

FLAG_ABOVE = 1000  # examples/fraud-local.yaml: where: "amount > 1000"
SUSPICIOUS_SHARE = 0.05  # one payment in twenty is large enough to be flagged

T = TypeVar("T")


def payment(n: int, rng: random.Random, now_ms: int) -> tuple[str, str]:
    """The n-th payment as (key, JSON value); ``ts`` is when it was made, for the latency."""
    card = f"card-{rng.randrange(10_000):04d}"
    if rng.random() < SUSPICIOUS_SHARE:
        amount = rng.uniform(FLAG_ABOVE + 1, 5 * FLAG_ABOVE)
    else:
        amount = rng.uniform(1, 300)
    return card, json.dumps({"id": f"p{n:07d}", "card": card, "amount": round(amount, 2), "ts": now_ms})


def latency_ms(value: str | bytes, received_ms: int) -> int | None:
    """Made -> flagged -> read back: the end-to-end latency of one flagged payment."""
    try:
        made = json.loads(value)["ts"]
    except (ValueError, KeyError, TypeError):
        return None
    return max(0, received_ms - int(made))


def flagged_line(value: str | bytes, latency: int | None) -> str:
    try:
        p = json.loads(value)
        what = f"{p['id']} {p['card']} amount {p['amount']:>9,.2f}"
    except (ValueError, KeyError, TypeError):
        what = str(value)
    return f"flagged  {what}  latency {'-' if latency is None else f'{latency} ms'}"


def percentile(values: Sequence[T], q: float, *, presorted: bool = False) -> T | None:
    """The nearest-rank percentile (q in 0..100): the smallest value with at least q % of
    the values at or below it; None without values. ``presorted`` skips the sort, for
    values already in order (a large numpy array).

    The one percentile of the repository: `make dev`'s latency line and every figure of
    bench/ (windows, repetitions, profiles, the operator's and the recovery's spreads).
    Nearest rank, not numpy's interpolation, because the headline tables of
    docs/benchmarks.md were made with it, so their figures keep their meaning; because it
    is a latency some record really had, never one between two; because p100 is the max;
    and because the HDR histograms the plots are redrawn from rank as well instead of
    interpolating (tests/unit/bench/test_latency_method.py holds the two within 1 %).
    A median is its q=50: of an even count, the lower middle value."""
    if len(values) == 0:
        return None
    ordered = values if presorted else sorted(values)
    rank = max(1, min(len(ordered), int(-(-len(ordered) * q // 100))))  # ceil(n * q / 100)
    return ordered[rank - 1]


def latency_line(mode: str, latencies: list[int]) -> str:
    """Over the flagged payments of the last interval: what the seeds compare across modes."""
    if not latencies:
        return f"latency  {mode}: no flagged payment in this interval"
    return (f"latency  {mode}: p50 {percentile(latencies, 50)} ms, p99 {percentile(latencies, 99)} ms, "
            f"max {max(latencies)} ms over {len(latencies)} flagged")  # fmt: skip
