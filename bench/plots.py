"""PNG plots for docs/benchmarks.md from the JSON results (matplotlib, no display).

.venv/bin/python -m bench.plots            # from the newest results of each benchmark
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.common import ROOT, latest_results, log

IMG_DIR = ROOT / "docs" / "img"
COLORS = {
    "baseline": "tab:gray",
    "continuous": "tab:blue",
    "continuousStreamq": "tab:cyan",
    "realTime": "tab:green",
    "realTime30s": "tab:olive",
    "microBatch": "tab:red",
    "flink": "tab:purple",
    "flinkCheckpointed": "tab:pink",
}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def latency_plots(path: Path, out_dir: Path = IMG_DIR) -> list[Path]:
    """One CDF per rate (every path, its repetitions' histograms added up) and cold vs warm p99:
    both from the HDR histograms of the one results file the tables cite."""
    from bench.latency_stats import hdr_decode

    plt = _pyplot()
    results = json.loads(Path(path).read_text())
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    runs = [r for r in results["runs"] if r.get("steps")]
    rates = sorted({s["rate"] for r in runs for s in r["steps"]})
    paths = list(dict.fromkeys(r["path"] for r in runs))

    def pooled(path: str, rate: int, window: str):
        hists = [hdr_decode(s[window]["hdrUs"]) for r in runs if r["path"] == path for s in r["steps"]
                 if s["rate"] == rate and s.get(window) and s[window].get("hdrUs")]  # fmt: skip
        for h in hists[1:]:
            hists[0].add(h)
        return hists[0] if hists else None

    for rate in rates:
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for path in paths:
            h = pooled(path, rate, "measured")
            if h is None:
                continue
            qs = [q / 10 for q in range(0, 990)] + [99 + q / 100 for q in range(0, 100)] + [99.99, 99.999]
            ms = [h.get_value_at_percentile(q) / 1000 for q in qs]
            p99 = results["cells"][path][str(rate)]["measured"]["p99"]["median"]  # the table's figure
            ax.plot(ms, [max(1 - q / 100, 1e-5) for q in qs], label=f"{path} (p99 {p99:,.1f} ms, median of the runs)",
                    color=COLORS.get(path), drawstyle="steps-post")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("end-to-end latency, due -> received (ms, log)")
        ax.set_ylabel("fraction of records slower (log)")
        ax.set_title(f"Latency CDF at {rate:,} records/s (each curve: its repetitions pooled)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        target = out_dir / f"latency-cdf-{rate}.png"
        fig.savefig(target, dpi=110)
        plt.close(fig)
        written.append(target)
    # Cold (first seconds after the first output) against warm, p99 per path at the first rate.
    rate = rates[0] if rates else None
    cells = results["cells"]
    shown = [p for p in paths if "p99" in ((cells.get(p, {}).get(str(rate)) or {}).get("cold") or {})
             and "p99" in cells[p][str(rate)]["measured"]]  # fmt: skip
    if shown:
        fig, ax = plt.subplots(figsize=(7, 4.2))
        x = range(len(shown))
        cold = [cells[p][str(rate)]["cold"]["p99"]["median"] for p in shown]
        warm = [cells[p][str(rate)]["measured"]["p99"]["median"] for p in shown]
        ax.bar([i - 0.2 for i in x], cold, width=0.4, label="cold window p99 (median of repetitions)")
        ax.bar([i + 0.2 for i in x], warm, width=0.4, label="measured window p99 (median of repetitions)")
        ax.set_xticks(list(x), shown)
        ax.set_yscale("log")
        ax.set_ylabel("ms (log)")
        ax.set_title(f"Cold start against warm, {rate:,} records/s")
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        fig.tight_layout()
        target = out_dir / f"latency-cold-{rate}.png"
        fig.savefig(target, dpi=110)
        plt.close(fig)
        written.append(target)
    for p in written:
        log(f"wrote {p.relative_to(ROOT)}")
    return written


def recovery_plot(path: Path, out_dir: Path = IMG_DIR) -> list[Path]:
    plt = _pyplot()
    results = json.loads(Path(path).read_text())
    kills = results.get("kills", [])
    if not kills:
        return []
    mode = results["settings"]["mode"]
    out_dir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    x = [k["kill"] for k in kills]
    started = [k.get("restartToQueryStartedS") or 0 for k in kills]
    first = [k["restartToFirstOutputS"] or 0 for k in kills]
    ax.bar(x, started, label="restart -> query started (JVM, session, start())")
    ax.bar(x, [f - s for f, s in zip(first, started, strict=True)], bottom=started, label="query started -> first output record")
    for xi, f, k in zip(x, first, kills, strict=True):
        ax.annotate(f"{f:.1f}s, {k.get('duplicates', 0)} dup", (xi, f), ha="center", fontsize=7,
                    textcoords="offset points", xytext=(0, 3))  # fmt: skip
    ax.set_xlabel("kill #")
    ax.set_ylabel("seconds after the restart")
    ax.set_title(f"Recovery after SIGKILL of the driver ({mode}, {results['settings']['rate']:,} records/s)")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    target = out_dir / f"recovery-{mode}.png"
    fig.savefig(target, dpi=110)
    plt.close(fig)
    log(f"wrote {target.relative_to(ROOT)}")
    return [target]


def autoscale_plot(path: Path, out_dir: Path = IMG_DIR) -> list[Path]:
    """bench.autoscale: input and processed rows/s and the lag (left), executors (right), over time."""
    plt = _pyplot()
    run = json.loads(Path(path).read_text())["run"]
    samples = run["samples"]
    if not samples:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    t = [s["t"] for s in samples]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(t, [s["input_rate"] for s in samples], label="input rows/s", color="tab:blue")
    ax.plot(t, [s["processed_rate"] for s in samples], label="processed rows/s of batch time", color="tab:green", alpha=0.6)
    ax.plot(t, [s["lag"] for s in samples], label="lag (records)", color="tab:red")
    ax.set_xlabel("seconds since the step up")
    ax.set_ylabel("rows/s, records")
    right = ax.twinx()
    right.step(t, [s["executors"] for s in samples], where="post", label="executors (status)", color="black")
    right.step(t, [s["executor_pods"] for s in samples], where="post", label="executor pods Running", color="gray",
               linestyle="--")  # fmt: skip
    right.set_ylabel("executors")
    right.set_ylim(0, max(s["executors"] or 0 for s in samples) + 1)
    if run.get("stepped_down_at_s") is not None:
        ax.axvline(run["stepped_down_at_s"], color="gray", linestyle=":", label="step down")
    lines = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    labels = ax.get_legend_handles_labels()[1] + right.get_legend_handles_labels()[1]
    ax.legend(lines, labels, fontsize=7, loc="upper right")
    ax.set_title(f"Autoscaling in place (microBatch): one executor {run['per_executor']:.0f} rows/s, "
                 f"steps to {run['high_rate']:.0f} and {run['low_rate']:.0f} rows/s", fontsize=9)  # fmt: skip
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    target = out_dir / "autoscale.png"
    fig.savefig(target, dpi=110)
    plt.close(fig)
    log(f"wrote {target.relative_to(ROOT)}")
    return [target]


def main() -> int:
    done = False
    for bench, draw in (
        ("latency", latency_plots),
        ("recovery-continuous", recovery_plot),
        ("recovery-realTime", recovery_plot),
        ("recovery-microBatch", recovery_plot),
        ("autoscale", autoscale_plot),
    ):
        path = latest_results(bench)
        if path is not None:
            draw(path)
            done = True
    if not done:
        print("no results in bench/results/ yet", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
