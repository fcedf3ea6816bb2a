"""Markdown tables from the newest results, for docs/benchmarks.md.

    .venv/bin/python -m bench.report            # prints the tables
    .venv/bin/python -m bench.report FILE...    # from given result files
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.common import latest_results, table


def load_line(r: dict) -> str:
    m = r["machine"]
    load = r.get("load") or r.get("loadWholeRun") or {}
    return (f"{m['cores']} cores ({m['cpuModel']}), {m['memoryGiB']} GiB, kernel {m['kernel']}, {m['java']}; "
            f"commit {r['commit']}; {r['started']} -> {r['finished']}; load average at start "
            f"{m['loadAverageAtStart']}, during the run 1-min load {load.get('load1Min')}-{load.get('load1Max')} "
            f"(mean {load.get('load1Mean')}), CPU busy {load.get('cpuBusyPctMean')}%, CPU pressure (PSI some avg10) "
            f"{load.get('cpuPressurePctMean')}%")  # fmt: skip


def latency(r: dict) -> str:
    rows = []
    for mode, res in r["modes"].items():
        for s in res.get("steps", []):
            lat = s["latencyMs"]
            to_spark = s["sendToSinkWriteMs"]["p50"] if mode != "baseline" else None  # no Spark in between
            why = s["why"].split(";")[0].split(" < ")[0]
            rows.append([mode, s["offeredRate"], s["achievedInputRate"], lat["p50"], lat["p95"], lat["p99"], lat["p99.9"],
                         lat["max"], to_spark, "yes" if s["sustained"] else "no (" + why + ")",
                         *((s["cpuCores"]["job"], s.get("waitingForCpu", {}).get("job")) if mode != "baseline" else (None, None)),
                         s["cpuCores"]["broker"],
                         s["load"].get("load1Mean"), s["load"].get("cpuPressurePctMean")])  # fmt: skip
        if res.get("error"):
            rows.append([mode, "error: " + res["error"].splitlines()[-1][:80], *[""] * 13])
    out = table(["mode", "offered/s", "achieved in/s", "p50 ms", "p95 ms", "p99 ms", "p99.9 ms", "max ms",
                 "send->Spark write p50 ms", "sustained", "job cores", "job threads waiting for CPU", "broker cores",
                 "load1", "CPU pressure %"], rows)  # fmt: skip
    return out + f"\n\n{load_line(r)}. Continuous sustained up to {r.get('continuousMaxSustained')} records/s offered."


def recovery(r: dict) -> str:
    rows = [[k["kill"], k["lastCommittedAtKill"], k.get("restartToQueryStartedS"), k["restartToFirstOutputS"],
             k["killToFirstOutputS"], k.get("duplicates")] for k in r["kills"]]  # fmt: skip
    s = r["summary"]
    out = table(["kill", "last committed epoch/batch", "restart -> query started s", "restart -> first output s",
                 "kill -> first output s", "duplicates"], rows)  # fmt: skip
    return out + (f"\n\n{r['settings']['mode']} at {r['settings']['rate']:,} records/s: {s['recordsSent']:,} sent, "
                  f"{s['recordsExpected']:,} pass the filter, {s['uniqueReceived']:,} arrived, duplicates "
                  f"{s['duplicates']:,}, **lost {s['lost']}**.\n\n{load_line(r)}.")  # fmt: skip


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


def tuning(paths: list[Path]) -> str:
    """One row per labelled run of continuous mode: the setting tried, then p50/p99 at each rate."""
    rows = []
    for path in sorted(paths, key=lambda p: p.name.rsplit("-", 1)[-1]):
        r = json.loads(path.read_text())
        res = r["modes"].get("continuous")
        if not res:
            continue
        s = r["settings"]
        tried = [f"{k}={v}" for k, v in s.get("conf", []) + s.get("source_option", []) + s.get("sink_option", [])]
        if s.get("autogroup_nice"):
            tried.append(f"--autogroup-nice {s['autogroup_nice']}")
        steps = {st["offeredRate"]: st for st in res.get("steps", [])}
        cells = []
        for rate in (1000, 10000):
            st = steps.get(rate)
            cells += [f"{st['latencyMs']['p50']:.0f} / {st['latencyMs']['p99']:.0f}" + ("" if st["sustained"] else " (not sustained)")
                      if st else "-", st.get("waitingForCpu", {}).get("job") if st else None]  # fmt: skip
        load = r.get("load") or {}
        rows.append([r["started"][11:16], r.get("label") or "full run", ", ".join(tried) or "(defaults)", *cells, load.get("load1Mean"),
                     load.get("cpuPressurePctMean")])  # fmt: skip
    return table(["UTC", "run", "setting", "1k/s p50 / p99 ms", "job threads waiting", "10k/s p50 / p99 ms",
                  "job threads waiting", "load1", "CPU pressure %"], rows)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = list(argv if argv is not None else sys.argv[1:])
    if args[:1] == ["--tuning"]:
        from bench.common import RESULTS_DIR

        print(tuning([Path(a) for a in args[1:]] or sorted((RESULTS_DIR / "tuning").glob("latency-*.json"))))
        return 0
    files = [Path(a) for a in args]
    if not files:
        files = [p for p in (latest_results("latency"), latest_results("recovery-continuous"),
                             latest_results("recovery-microBatch"), latest_results("operator")) if p]  # fmt: skip
    for path in files:
        r = json.loads(path.read_text())
        render = {"latency": latency, "recovery": recovery, "operator": operator}[r["bench"]]
        print(f"### {path.name}\n\n{render(r)}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
