"""Markdown tables for docs/benchmarks.md, written from the results files they cite.

    .venv/bin/python -m bench.report                 # print the tables of the newest results
    .venv/bin/python -m bench.report FILE...         # of given result files
    .venv/bin/python -m bench.report --write         # re-render every block of docs/benchmarks.md
    .venv/bin/python -m bench.report --write --latest   # ... after pointing the blocks that follow the latest at the newest file
    .venv/bin/python -m bench.report --write --repoint FILE   # ... after pointing the blocks citing FILE at the newest of its kind

A block in the page is ``<!-- bench.report FILE -->`` ... ``<!-- /bench.report -->``:
everything between the two lines is generated from FILE, so a table cannot drift from
the JSON it names. A block that names its file keeps it: the sentences around it quote
that run. Only a block marked ``<!-- bench.report latest FILE -->`` (the current figure
of its kind) follows the newest file of FILE's kind under ``--latest``; a block that names no file but a kind,
``<!-- bench.report KIND -->``, is given the newest file of KIND.
``--repoint FILE`` moves the blocks citing FILE, marked or not, on purpose.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.common import ROOT, latest_results, table

PAGE = ROOT / "docs" / "benchmarks.md"
BLOCK = re.compile(r"(<!-- bench\.report (?P<follow>latest )?(?P<file>\S+) -->\n)(?P<body>.*?)(<!-- /bench\.report -->)", re.S)


def load_line(r: dict) -> str:
    m = r["machine"]
    load = r.get("load") or r.get("loadWholeRun") or {}
    return (f"{m['cores']} cores ({m['cpuModel']}), {m['memoryGiB']} GiB, {m['java']}; commit {r['commit']}; "
            f"{r['started']} -> {r['finished']}; load average at start {m['loadAverageAtStart']}, during the run "
            f"{load.get('load1Min')}-{load.get('load1Max')} (mean {load.get('load1Mean')}), CPU busy "
            f"{load.get('cpuBusyPctMean')}%, CPU pressure (PSI some avg10) {load.get('cpuPressurePctMean')}%")  # fmt: skip


def _span(figure: dict | None, key: str) -> str:
    f = (figure or {}).get(key)
    if not f:
        return "-"
    fmt = (lambda v: f"{v:,.0f}") if f["median"] >= 100 else (lambda v: f"{v:.1f}")
    return f"{fmt(f['median'])} ({fmt(f['min'])}-{fmt(f['max'])})"


def latency(r: dict) -> str:
    """Per path and rate: median (range) over the repetitions, cold window, split, losses."""
    rows = []
    for path, by_rate in r["cells"].items():
        for rate, cell in by_rate.items():
            m, c = cell["measured"], cell["cold"]
            split = m.get("splitP50Ms", {})
            spark = split.get("sourceAppendToSinkSend") if path != "baseline" else None
            rows.append([path, int(rate), m["repetitions"], _span(m, "p50"), _span(m, "p99"), _span(m, "p99.9"),
                         _span(m, "max"), _span(c, "p50"), _span(c, "p99"), split.get("dueToSourceAppend"), spark,
                         split.get("sinkSendToReceive") if path != "baseline" else None, m["lost"], m["duplicates"],
                         cell["sustainedIn"]])  # fmt: skip
    out = table(["path", "rate/s", "reps", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "cold p50 ms", "cold p99 ms",
                 "due -> broker p50", "broker -> sink send p50", "sink send -> received p50", "lost", "dups",
                 "kept up"], rows)  # fmt: skip
    s = r["settings"]
    return (out + "\n\n" + where_the_cpu_went(r) + f"\n\nMedian (min-max) over {s['reps']} repetitions, each a fresh job, paths in rotated order; "
            f"cold = the first {s['cold']:.0f} s after the first output, measured = {measured_windows(r)} after a further "
            f"{s['warmup']:.0f} s{rewarm_text(s)}. {load_line(r)}.\n\n" + targets(r))  # fmt: skip


def rewarm_text(settings: dict) -> str:
    return f" ({settings['rewarm']:.0f} s at each later rate)" if "rewarm" in settings else ""


def measured_windows(r: dict) -> str:
    """The measured window's length; a path whose window was stretched to whole batches (measuredS) says so."""
    base = r["settings"]["measure"]
    longer = {
        run["path"]: st["measuredS"] for run in r["runs"] for st in run.get("steps", []) if st.get("measuredS", base) != base
    }
    extra = "; ".join(f"{p} {v:.0f} s" for p, v in sorted(longer.items()))
    return f"{base:.0f} s" + (f" ({extra}: whole batches, at least two)" if extra else "")


def where_the_cpu_went(r: dict) -> str:
    """Per path and rate: cores per process (median over the repetitions), the job JVM's JIT
    compilers in the cold and the measured window, and the p99 of each cold second (per repetition)."""
    from devtools.payments import percentile

    rows = []
    for path in r["cells"]:
        runs = [run for run in r["runs"] if run["path"] == path and run.get("steps")]
        for rate in r["cells"][path]:
            steps = [st for run in runs for st in run["steps"] if str(st["rate"]) == rate]
            med = lambda xs: round(percentile(xs, 50), 2) if xs else None  # noqa: E731
            cores = {k: med([st["cpuCores"][k] for st in steps]) for k in ("job", "broker", "producer", "consumer")}
            jit = [st["jvmCores"] for st in steps if st.get("jvmCores")]
            jit_cold = med([j["cold"]["jit"] for j in jit if j.get("cold")])
            jit_measured = med([j["measured"]["jit"] for j in jit])
            seconds = [
                "/".join(f"{v:,.0f}" for v in (st["cold"] or {}).get("p99BySecondMs", [])) for st in steps if st.get("cold")
            ]
            rows.append([path, int(rate), cores["job"] if path != "baseline" else None, cores["broker"], cores["producer"],
                         cores["consumer"], jit_cold, jit_measured, "; ".join(seconds) or None])  # fmt: skip
    return table(["path", "rate/s", "job cores", "broker cores", "producer cores", "consumer cores",
                  "JIT cores, cold window", "JIT cores, measured", "cold window: p99 of each second, ms (per repetition)"], rows)  # fmt: skip


def targets(r: dict) -> str:
    """The issue's targets, computed from the same cells (nothing typed by hand)."""
    lines = []
    for rate, floor in ((k, v["measured"]) for k, v in r["cells"].get("baseline", {}).items()):
        paths = {p: by_rate[rate]["measured"] for p, by_rate in r["cells"].items() if p != "baseline" and rate in by_rate
                 and by_rate[rate]["measured"].get("p99")}  # fmt: skip
        streamq = {p: m for p, m in paths.items() if not p.startswith("flink")}
        if not streamq or "p50" not in floor:
            continue
        fastest = min(streamq, key=lambda p: streamq[p]["p99"]["median"])
        f, fp50, fp99 = streamq[fastest], floor["p50"]["median"], floor["p99"]["median"]
        verdict = lambda ok: "**met**" if ok else "**not met**"  # noqa: E731
        lines.append(f"- At {int(rate):,}/s the fastest streamq path by p99 is `{fastest}`: p50 {f['p50']['median']:.1f} ms "
                     f"against floor p50 + 2 = {fp50 + 2:.1f} ms ({verdict(f['p50']['median'] <= fp50 + 2)}); p99 "
                     f"{f['p99']['median']:.1f} ms against 2 x floor p99 = {2 * fp99:.1f} ms "
                     f"({verdict(f['p99']['median'] <= 2 * fp99)}).")  # fmt: skip
        if "continuous" in streamq:
            c = streamq["continuous"]["p99"]["median"]
            lines.append(f"- continuous p99 {c:.1f} ms = {c / fp99:.1f} x floor p99 (target 5 x: {verdict(c <= 5 * fp99)}).")
        if "microBatch" in streamq:
            mb = streamq["microBatch"]["p99"]["median"]
            lines.append(f"- microBatch p99 {mb:,.0f} ms = {mb / f['p99']['median']:.0f} x the fastest path's p99 (target >= 20 x: "
                         f"{verdict(mb >= 20 * f['p99']['median'])}).")  # fmt: skip
        peers = (("flink", "Flink SQL peer", "Flink's"), ("flinkCheckpointed", "Flink SQL peer with a checkpoint every second",
                                                           "the checkpointed peer's"))  # fmt: skip
        for peer, what, whose in peers:
            if peer in paths:
                fl = paths[peer]
                lines.append(f"- {what}: p50 {fl['p50']['median']:.1f} ms, p99 {fl['p99']['median']:.1f} ms; the fastest "
                             f"streamq path's p99 is {f['p99']['median'] / fl['p99']['median']:.2f} x {whose}.")  # fmt: skip
    return "\n".join(lines)


def recovery(r: dict) -> str:
    gaps = any("largestGapS" in k for k in r["kills"])  # runs since bench.recovery --upgrade measure it
    rows = [[k["kill"], k["lastCommittedAtKill"], k.get("restartToQueryStartedS"), k["restartToFirstOutputS"],
             k["killToFirstOutputS"], *([k.get("largestGapS")] if gaps else []), k.get("duplicates")]
            for k in r["kills"]]  # fmt: skip
    s = r["summary"]
    stop = "stop" if r["settings"].get("upgrade", "none") != "none" else "kill"
    out = table(["kill" if stop == "kill" else "stop", "last committed epoch/batch", "restart -> query started s",
                 "restart -> first output s", f"{stop} -> first output s", *(["largest gap s"] if gaps else []),
                 "duplicates"], rows)  # fmt: skip
    return out + (f"\n\n{r['settings']['mode']} at {r['settings']['rate']:,} records/s: {s['recordsSent']:,} sent, "
                  f"{s['recordsExpected']:,} pass the filter, {s['uniqueReceived']:,} arrived, duplicates "
                  f"{s['duplicates']:,}, **lost {s['lost']}**.\n\n{load_line(r)}.")  # fmt: skip


def chaos(r: dict) -> str:
    # Minutes rounded to one decimal and seconds recorded with one: shown as text, so that the
    # table's float format (two decimals under 10) does not add a digit nobody measured.
    one = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
    rows = [[f["n"], one(f["atS"] / 60), f["fault"], one(f["runningAgainS"]), one(f["outputGrowingS"]), f["note"]]
            for f in r["faults"]]  # fmt: skip
    s, st = r["summary"], r["settings"]
    out = table(["fault #", "at min", "fault", "Running again after s", "output growing after s", "note"], rows)
    return out + (f"\n\n{len(r['faults'])} faults in {st['minutes']:g} min ({r['provider']} provider, seed {st['seed']}"
                  f"{', standby' if st['standby'] else ''}) at {st['rate']:g} payments/s: {s['recordsProduced']:,} produced, "
                  f"{s['undelivered']:,} undelivered, {s['recordsInSource']:,} in the source, {s['expectedFlagged']:,} "
                  f"flagged expected, {s['uniqueReceived']:,} arrived ({s['recordsOut']:,} records out), duplicates "
                  f"{s['duplicates']:,}, unexpected {s['unexpected']:,}, **lost {s['lost']:,}**.\n\n{load_line(r)}.")  # fmt: skip


def _ms(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:,.0f}"


def settle(r: dict) -> str:
    """One row per window after the ramp; per path its p50 / p99 and the cores its JVM spent compiling."""
    runs = [run for run in r["runs"] if run.get("windows")]
    rows = []
    for i, w in enumerate(runs[0]["windows"] if runs else []):
        row = [f"{w['fromS']:.0f}-{w['toS']:.0f}"]
        for run in runs:
            x = run["windows"][i] if i < len(run["windows"]) else None
            lat = (x or {}).get("latencyMs") or {}
            jit = ((x or {}).get("jvmCores") or {}).get("jit")
            row += [f"{_ms(lat['p50'])} / {_ms(lat['p99'])}" if lat else "-", jit if jit is not None else "-"]
        rows.append(row)
    header = ["s after the ramp"] + [h for run in runs for h in (f"{run['path']} p50 / p99 ms", f"{run['path']} JIT cores")]
    s = r["settings"]
    lost = ", ".join(f"{run['path']} {sum(w['expected'] - w['received'] for w in run['windows'])}" for run in runs)
    return table(header, rows) + (f"\n\nOne job per path, {s['ramp']:.0f} s at 1,000/s, then {s['rate']:,}/s for "
                                  f"{s['minutes']:g} min in {s['every']:.0f} s windows; lost: {lost}.\n\n{load_line(r)}.")  # fmt: skip


def operator(r: dict) -> str:
    cpu, rss = r["operatorCpuSeconds"], r["operatorRss"]
    a, q = r["applyStartToDriverCreatedS"], r["queryCreatedToDriverCreatedS"]
    rows = [
        ["StreamingQueries applied at once", r["queries"]],
        ["kubectl apply took (s)", r["applySeconds"]],
        ["all driver pods exist after (s)", r["allDriversAfterS"]],
        ["all queries have a status after (s)", r["allStatusesAfterS"]],
        ["apply start -> driver created p50 / p99 / max (s)", f"{a['p50']} / {a['p99']} / {a['max']}"],
        ["query stored -> driver created p50 / p99 / max (s)", f"{q['p50']} / {q['p99']} / {q['max']}"],
        [f"operator CPU during the burst ({cpu['burstWindowS']} s)", f"{cpu['burst']} s"],
        [f"operator CPU in the {cpu['quietWindowS']:.0f} s after it", f"{cpu['quiet']} s"],
        ["apiserver + etcd CPU during the burst", f"{r['apiserverEtcdCpuSecondsBurst']} s"],
        ["operator RSS before / peak (VmHWM)", f"{rss['beforeMiB']} / {rss['vmHWMMiB']} MiB"],
    ]
    return table(["", "value"], rows) + f"\n\n{load_line({**r, 'load': r.get('loadWholeRun')})}."


def setting_tried(settings: dict) -> str:
    """The Spark confs and Kafka source/sink options a labelled run set, or ``(defaults)``."""
    # The job's own log4j option rides along in extraJavaOptions: show only what was tried.
    conf = [f"{k}={' '.join(w for w in v.split() if not w.startswith('-Dlog4j2.'))}" for k, v in settings.get("conf", [])]
    source = [f"source {k}={v}" for k, v in settings.get("source_option", [])]
    sink = [f"sink {k}={v}" for k, v in settings.get("sink_option", [])]
    return ", ".join(conf + source + sink) or "(defaults)"


def runs_side_by_side(paths: list[Path]) -> str:
    """Labelled runs of an A/B, one row per run, path and rate: the setting tried against the others."""
    rows = []
    for path in sorted(paths, key=lambda p: p.name.rsplit("-", 1)[-1]):  # in the order they ran
        r = json.loads(path.read_text())
        tried = setting_tried(r["settings"])
        for mode, by_rate in r["cells"].items():
            for rate, cell in by_rate.items():
                m = cell["measured"]
                jit = [st["jvmCores"]["measured"]["jit"] for run in r["runs"] if run["path"] == mode
                       for st in run["steps"] if str(st["rate"]) == rate and st.get("jvmCores")]  # fmt: skip
                rows.append([r["started"][11:16], r["label"], mode, int(rate), m["p50"]["median"], m["p99"]["median"],
                             m["max"]["median"], (c := cell["cold"]) and c["p99"]["median"], jit[0] if jit else None,
                             (r.get("load") or {}).get("load1Mean"), tried])  # fmt: skip
    return table(["UTC", "run", "path", "rate/s", "p50 ms", "p99 ms", "max ms", "cold p99 ms", "JIT cores, measured",
                  "load1", "setting"], rows)  # fmt: skip


RENDER = {"latency": latency, "recovery": recovery, "operator": operator, "chaos": chaos, "settle": settle}


def render(path: Path) -> str:
    r = json.loads(path.read_text())
    return RENDER[r["bench"]](r)


def kind_of(path: Path) -> str:
    """The results family a file belongs to: latency, latency-LABEL, recovery-MODE, operator."""
    return path.name.rsplit("-", 1)[0]


def write_page(page: Path = PAGE, latest: bool = False, repoint: Sequence[str] = ()) -> list[str]:
    """Re-render every block of the page from the file it cites. With ``latest``, a block marked
    ``latest`` is pointed at the newest file of its kind first; a block that only names its file
    keeps it. ``repoint`` names cited files whose blocks move to the newest of their kind anyway."""
    text = page.read_text()
    cited = []
    moved = {str(Path(f)) for f in repoint}

    def block(m: re.Match) -> str:
        if "*" in m["file"]:  # an A/B: every run the pattern names, side by side
            runs = sorted(ROOT.glob(m["file"]))
            cited.extend(str(p.relative_to(ROOT)) for p in runs)
            return f"<!-- bench.report {m['follow'] or ''}{m['file']} -->\n{runs_side_by_side(runs)}\n\n<!-- /bench.report -->"
        if not m["file"].endswith(".json"):  # a kind, no file yet: the newest (then kept, unless marked latest)
            path = latest_results(m["file"], ROOT / "bench" / "results")
            if path is None:
                raise SystemExit(f"{page}: no results file of kind {m['file']!r} for its block")
        else:
            path = ROOT / m["file"]
            if (latest and m["follow"]) or m["file"] in moved:
                path = latest_results(kind_of(path), path.parent) or path
        cited.append(str(path.relative_to(ROOT)))
        return (
            f"<!-- bench.report {m['follow'] or ''}{path.relative_to(ROOT)} -->\n{render(path).rstrip()}\n\n"
            f"<!-- /bench.report -->"
        )

    page.write_text(BLOCK.sub(block, text))
    return cited


def main(argv: list[str] | None = None) -> int:
    args = list(argv if argv is not None else sys.argv[1:])
    if args[:1] == ["--write"]:
        repoint = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--repoint"]
        for cited in write_page(latest="--latest" in args, repoint=repoint):
            print(f"rendered {cited}")
        return 0
    files = [Path(a) for a in args] or [p for p in (latest_results("latency"), latest_results("recovery-continuous"),
                                                    latest_results("recovery-realTime"), latest_results("recovery-microBatch"),
                                                    latest_results("operator")) if p]  # fmt: skip
    for path in files:
        print(f"### {path.name}\n\n{render(path)}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
