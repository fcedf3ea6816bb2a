"""PNG plots for docs/benchmarks.md from the JSON results (matplotlib, no display).

    .venv/bin/python -m bench.plots            # from the newest results of each benchmark
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.common import ROOT, latest_results, log

IMG_DIR = ROOT / "docs" / "img"
COLORS = {"baseline": "tab:gray", "continuous": "tab:blue", "realTime": "tab:green", "microBatch": "tab:red"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def latency_plots(path: Path, out_dir: Path = IMG_DIR) -> list[Path]:
    plt = _pyplot()
    results = json.loads(Path(path).read_text())
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    modes = results["modes"]
    rates = sorted({s["offeredRate"] for m in modes.values() for s in m.get("steps", [])})
    # One CDF figure per rate, every mode on it: the tail is what matters, so the y axis is
    # "fraction slower than" on a log scale.
    for rate in rates:
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for mode, res in modes.items():
            step = next((s for s in res.get("steps", []) if s["offeredRate"] == rate), None)
            if not step or not step["cdf"]:
                continue
            points = sorted(dict((q, v) for q, v in step["cdf"]).items())  # one point per quantile
            qs = [q for q, _ in points]
            ms = [v for _, v in points]
            ax.plot(ms, [max(1 - q / 100, 1e-5) for q in qs], label=f"{mode} (p99 {step['latencyMs']['p99']:.1f} ms)",
                    color=COLORS.get(mode), drawstyle="steps-post")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("end-to-end latency (ms, log)")
        ax.set_ylabel("fraction of records slower (log)")
        ax.set_title(f"Latency CDF at {rate:,} records/s offered")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        target = out_dir / f"latency-cdf-{rate}.png"
        fig.savefig(target, dpi=110)
        plt.close(fig)
        written.append(target)
    # Latency against rate, p50 and p99 per mode.
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for mode, res in modes.items():
        steps = sorted(res.get("steps", []), key=lambda s: s["offeredRate"])
        if not steps:
            continue
        x = [s["offeredRate"] for s in steps]
        ax.plot(x, [s["latencyMs"]["p99"] for s in steps], marker="o", color=COLORS.get(mode), label=f"{mode} p99")
        ax.plot(x, [s["latencyMs"]["p50"] for s in steps], marker=".", linestyle="--", color=COLORS.get(mode),
                label=f"{mode} p50", alpha=0.7)  # fmt: skip
        for s in steps:
            if not s["sustained"]:
                ax.annotate("not sustained", (s["offeredRate"], s["latencyMs"]["p99"]), fontsize=7,
                            textcoords="offset points", xytext=(4, 4))  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("offered rate (records/s, log)")
    ax.set_ylabel("latency (ms, log)")
    ax.set_title("End-to-end latency vs offered rate")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    target = out_dir / "latency-vs-rate.png"
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
    ax.bar(x, [f - s for f, s in zip(first, started)], bottom=started, label="query started -> first output record")
    for xi, f, k in zip(x, first, kills):
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


def main() -> int:
    done = False
    for bench, draw in (("latency", latency_plots), ("recovery-continuous", recovery_plot), ("recovery-microBatch", recovery_plot)):
        path = latest_results(bench)
        if path is not None:
            draw(path)
            done = True
    if not done:
        print("no results in bench/results/ yet", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
