"""Render the panels of charts/streamq/dashboards/streamq.json to a PNG with matplotlib,
from a real Prometheus (query_range). Not Grafana: the same PromQL, drawn simply, so the
docs can show what the dashboard shows on real data (docs/img/dashboard-e2e.png comes
from an e2e run: tests/e2e/test_observability.py with STREAMQ_E2E_DASHBOARD_PNG set).

    .venv/bin/python hack/dashboard_png.py --prometheus http://127.0.0.1:9090 \\
        --start <unix s> --end <unix s> --out docs/img/dashboard-e2e.png [--var job=streamq-operator]

Grafana's variables become regexes (`$job`, `$namespace`, `$query`: ".*" unless set with
--var); `$__rate_interval` becomes four scrape intervals (--scrape-interval).
"""

from __future__ import annotations

import json
import math
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

DASHBOARD = Path(__file__).resolve().parents[1] / "charts" / "streamq" / "dashboards" / "streamq.json"


def substitute(expr: str, variables: dict[str, str], rate_interval: str) -> str:
    expr = expr.replace("$__rate_interval", rate_interval)
    for name in sorted(variables, key=len, reverse=True):
        expr = expr.replace(f"${name}", variables[name])
    return expr


def query_range(prometheus: str, expr: str, start: float, end: float, step: float) -> list[dict]:
    params = urllib.parse.urlencode({"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"})
    with urllib.request.urlopen(f"{prometheus}/api/v1/query_range?{params}", timeout=30) as r:
        body = json.loads(r.read())
    if body.get("status") != "success":
        raise RuntimeError(f"{expr}: {body}")
    return body["data"]["result"]


def legend(metric: dict[str, str], fmt: str | None) -> str:
    if fmt:
        out = fmt
        for key, value in metric.items():
            out = out.replace("{{" + key + "}}", value).replace("{{ " + key + " }}", value)
        return out
    shown = {k: v for k, v in metric.items() if k not in ("__name__", "job", "instance", "pod")}
    return ",".join(f"{k}={v}" for k, v in sorted(shown.items())) or metric.get("__name__", "value")


def panels(dashboard: dict) -> list[dict]:
    out = []
    for panel in dashboard.get("panels", []):
        if panel.get("type") == "row":
            out.extend(p for p in panel.get("panels", []) if p.get("targets"))
        elif panel.get("targets"):
            out.append(panel)
    return out


def render(prometheus: str, start: float, end: float, out: Path, variables: dict[str, str], scrape_interval: float,
           title: str | None = None) -> list[str]:  # fmt: skip
    """Draws every panel; returns the titles of panels that had no data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    dashboard = json.loads(DASHBOARD.read_text())
    shown = panels(dashboard)
    step = max(1.0, (end - start) / 300)
    rate_interval = f"{int(max(4 * scrape_interval, 2 * step))}s"
    cols = 2
    rows = math.ceil(len(shown) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(14, 3.1 * rows), squeeze=False)
    empty = []
    for ax, panel in zip(axes.flat, shown, strict=False):  # the last row may have an empty cell
        drawn = 0
        for target in panel["targets"]:
            expr = substitute(target["expr"], variables, rate_interval)
            for series in query_range(prometheus, expr, start, end, step):
                xs = [datetime.fromtimestamp(float(t), UTC) for t, _ in series["values"]]
                ys = [float(v) for _, v in series["values"]]
                kind = "step" if panel.get("type") == "stat" else "line"
                label = legend(series["metric"], target.get("legendFormat"))
                (ax.step(xs, ys, where="post", label=label) if kind == "step" else ax.plot(xs, ys, label=label))
                drawn += 1
        unit = ((panel.get("fieldConfig") or {}).get("defaults") or {}).get("unit")
        ax.set_title(panel.get("title", "") + (f"  [{unit}]" if unit else ""), fontsize=10)
        ax.set_xlim(datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC))
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S", tz=UTC))
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=7, loc="upper left")
        else:
            empty.append(panel.get("title", "?"))
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="grey")
    for ax in list(axes.flat)[len(shown) :]:
        ax.axis("off")
    stamp = f"{datetime.fromtimestamp(start, UTC):%Y-%m-%d %H:%M}-{datetime.fromtimestamp(end, UTC):%H:%M} UTC"
    fig.suptitle(title or f"{dashboard.get('title', 'streamq')}: the dashboard's panel queries on real data ({stamp}), "
                          "drawn with matplotlib (not Grafana)", fontsize=11)  # fmt: skip
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return empty


def name_regexes(texts: list[str]) -> dict[str, str]:
    pairs = [text.partition("=") for text in texts]
    bad = [text for text, (_, sep, _) in zip(texts, pairs, strict=True) if not sep]
    if bad:
        raise typer.BadParameter(f"expected NAME=REGEX, got {bad[0]!r}", param_hint="--var")
    return {name: regex for name, _, regex in pairs}


def main(
    prometheus: Annotated[str, typer.Option(help="its base URL, e.g. http://127.0.0.1:9090")],
    start: Annotated[float, typer.Option(help="unix seconds")],
    end: Annotated[float, typer.Option(help="unix seconds")],
    out: Annotated[Path, typer.Option(help="the PNG written")],
    var: Annotated[list[str], typer.Option(metavar="NAME=REGEX", help="NAME=REGEX for a dashboard variable")] = [],  # noqa: B006 - typer copies it
    scrape_interval: Annotated[float, typer.Option(help="Prometheus's, in seconds: $__rate_interval is four")] = 5.0,
) -> None:
    variables = {"job": ".*", "namespace": ".*", "query": ".*", **name_regexes(var)}
    empty = render(prometheus, start, end, out, variables, scrape_interval)
    print(f"wrote {out}" + (f"; no data in: {', '.join(empty)}" if empty else ""))


if __name__ == "__main__":
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command(help=__doc__)(main)
    app()
