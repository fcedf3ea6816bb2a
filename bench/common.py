"""What every benchmark shares: the machine it ran on, the load around it,
a printed table and one JSON file per run under bench/results/.

Benchmarks are not tests: they print figures and never assert on them.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "bench" / "results"

# The repository root must be importable: app, and the testbed the harnesses share with the tests
# (testbed.jobs, .kube, .operator, .specs; bench.chaos testbed.cluster).
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def utc_stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "app"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() + ("+app-changes" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine() -> dict[str, Any]:
    """Cores, memory, CPU model, kernel, Python and Java: enough to compare two runs."""
    import psutil

    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    return {
        "cores": os.cpu_count(),
        "cpuModel": model,
        "memoryGiB": round(psutil.virtual_memory().total / 2**30, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "java": java[0] if java else "",
        "loadAverageAtStart": [round(x, 2) for x in os.getloadavg()],
        "cpuPressurePctAtStart": cpu_pressure(),
        "schedAutogroup": autogroup_enabled(),
    }


class LoadSampler(threading.Thread):
    """Samples the machine's load once a second: load average, CPU busy %, and how much
    of the CPU the benchmark's own processes used (the rest is other people's work)."""

    def __init__(self, period_s: float = 1.0):
        super().__init__(name="bench-load", daemon=True)
        self.period_s = period_s
        self.samples: list[dict[str, float]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        import psutil

        psutil.cpu_percent(None)
        while not self._halt.wait(self.period_s):
            self.samples.append({"t": time.time(), "load1": os.getloadavg()[0], "cpuBusyPct": psutil.cpu_percent(None),
                                 "cpuPressurePct": cpu_pressure()})  # fmt: skip

    def stop(self) -> dict[str, Any]:
        self._halt.set()
        self.join(5)
        return self.summary()

    def summary(self, since: float | None = None, until: float | None = None) -> dict[str, Any]:
        chosen = [s for s in self.samples if (since is None or s["t"] >= since) and (until is None or s["t"] <= until)]
        if not chosen:
            return {}
        load = [s["load1"] for s in chosen]
        pressure = [s["cpuPressurePct"] for s in chosen if s["cpuPressurePct"] is not None]
        busy = [s["cpuBusyPct"] for s in chosen]
        return {
            "load1Min": round(min(load), 2),
            "load1Mean": round(sum(load) / len(load), 2),
            "load1Max": round(max(load), 2),
            "cpuBusyPctMean": round(sum(busy) / len(busy), 1),
            # Linux PSI: share of the time some runnable task waited for a CPU (0 on an idle machine).
            "cpuPressurePctMean": round(sum(pressure) / len(pressure), 1) if pressure else None,
        }


def cpu_pressure() -> float | None:
    """avg10 of /proc/pressure/cpu "some": % of the last 10 s some task waited for a CPU."""
    try:
        first = Path("/proc/pressure/cpu").read_text().splitlines()[0]
        return float(first.split("avg10=")[1].split()[0])
    except (OSError, IndexError, ValueError):
        return None


def other_cpu_hogs(exclude: set[int], limit: int = 5) -> list[dict[str, Any]]:
    """The busiest processes that are not ours, over one second: who else was using the CPU."""
    import psutil

    procs = []
    for p in psutil.process_iter(["pid", "name", "cmdline"]):
        if p.pid in exclude:
            continue
        try:
            p.cpu_percent(None)
            procs.append(p)
        except psutil.Error:
            pass
    time.sleep(1.0)
    rows = []
    for p in procs:
        try:
            pct = p.cpu_percent(None)
        except psutil.Error:
            continue
        if pct >= 5:
            cmd = " ".join(p.info.get("cmdline") or [p.info.get("name") or "?"])
            rows.append({"pid": p.pid, "cpuPct": round(pct, 1), "cmd": cmd[:120]})
    return sorted(rows, key=lambda r: -r["cpuPct"])[:limit]


def results_header(bench: str, settings: dict[str, Any]) -> dict[str, Any]:
    """How a results file starts: which bench, when, at which commit, on what machine, with which settings,
    and the processes that were not ours but busy at the start (they would skew the figures)."""
    return {"bench": bench, "started": now_iso(), "commit": git_commit(), "machine": machine(), "settings": dict(settings),
            "otherBusyProcessesAtStart": other_cpu_hogs({os.getpid()})}  # fmt: skip


def tree_cpu_seconds(pid: int) -> float:
    """user+system CPU seconds of a process and its live descendants."""
    import psutil

    try:
        root = psutil.Process(pid)
        total = 0.0
        for p in [root, *root.children(recursive=True)]:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        return total
    except psutil.Error:
        return 0.0


def tree_threads(pid: int, name: str | None = None) -> list[Path]:
    """/proc/<pid>/task/<tid> of every thread of a process and its live descendants (only
    processes called ``name`` when given)."""
    import psutil

    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        procs = [p for p in procs if name is None or p.name() == name]
    except psutil.Error:
        return []
    tasks = []
    for proc in procs:
        try:
            tasks += [Path(f"/proc/{proc.pid}/task/{tid}") for tid in os.listdir(f"/proc/{proc.pid}/task")]
        except OSError:
            continue
    return tasks


def tree_sched_seconds(pid: int) -> tuple[float, float]:
    """(on-CPU, waiting-for-a-CPU) seconds summed over every thread of a process tree, from
    /proc/<pid>/task/<tid>/schedstat. Waiting time is runnable-but-not-running: CPU starvation."""
    on_cpu = waiting = 0.0
    for task in tree_threads(pid):
        try:
            run_ns, wait_ns, _ = (task / "schedstat").read_text().split()
        except (OSError, ValueError):
            continue
        on_cpu += int(run_ns) / 1e9
        waiting += int(wait_ns) / 1e9
    return on_cpu, waiting


JVM_THREAD_KINDS = (("jit", ("C1 CompilerThre", "C2 CompilerThre")), ("gc", ("GC Thread", "G1 ", "VM Thread")))


def jvm_thread_seconds(pid: int) -> dict[str, float]:
    """On-CPU seconds of the JVMs under ``pid`` by kind of thread: the JIT compilers, the
    garbage collector, and everything else (the JVM names its own threads; /proc shows the names)."""
    out = {"jit": 0.0, "gc": 0.0, "other": 0.0}
    for task in tree_threads(pid, name="java"):
        try:
            name = (task / "comm").read_text().strip()
            on_cpu = int((task / "schedstat").read_text().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            continue
        kind = next((k for k, prefixes in JVM_THREAD_KINDS if name.startswith(prefixes)), "other")
        out[kind] += on_cpu
    return out


def set_autogroup_nice(pid: int, nice: int) -> bool:
    """With kernel.sched_autogroup_enabled=1 every session shares the CPU equally with every
    other session, whatever the processes' nice values; this sets the nice of ``pid``'s
    session group (root only). Returns whether it took."""
    try:
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))
        return True
    except OSError:
        return False


def autogroup_enabled() -> bool:
    try:
        return Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        return False


def cell(v: Any) -> str:
    """A figure as the tables show it: ``-`` for nothing, thousands separated, fewer decimals the larger it is."""
    if v is None:
        return "-"
    if isinstance(v, float):
        if abs(v) < 10:
            return f"{v:.2f}"
        return f"{v:.1f}" if abs(v) < 1000 else f"{v:,.0f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table: what docs/benchmarks.md holds (bench.report) and the results files keep."""
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = lambda values: "| " + " | ".join(v.rjust(w) for v, w in zip(values, widths, strict=True)) + " |"  # noqa: E731
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|", *map(line, cells)])


def rich_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None):
    """The same table for a terminal (rich); cells are text, never rich markup."""
    from rich.table import Table
    from rich.text import Text

    out = Table(title=title)
    for h in headers:
        out.add_column(Text(h), justify="right")
    for row in rows:
        out.add_row(*(Text(cell(v)) for v in row))
    return out


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None, file=None) -> None:
    """A rich table on a terminal; the Markdown table elsewhere (a log, a pipe: no wrapping, pastes into the docs)."""
    from rich.console import Console

    console = Console(file=file)
    if console.is_terminal:
        console.print(rich_table(headers, rows, title))
    else:
        print((f"{title}\n\n" if title else "") + table(headers, rows), file=file or sys.stdout, flush=True)


def write_results(bench: str, payload: dict[str, Any], results_dir: Path | None = None) -> Path:
    folder = results_dir or RESULTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{bench}-{utc_stamp()}.json"
    path.write_text(json.dumps(payload, indent=1, sort_keys=False) + "\n")
    return path


def latest_results(bench: str, results_dir: Path | None = None) -> Path | None:
    """The newest ``<bench>-<UTC stamp>.json``: recovery-continuous is not recovery-continuous-standby-release."""
    stamp = re.compile(rf"{re.escape(bench)}-\d{{8}}T\d{{6}}Z\.json")
    found = sorted(p for p in (results_dir or RESULTS_DIR).glob(f"{bench}-*.json") if stamp.fullmatch(p.name))
    return found[-1] if found else None


def log(message: str) -> None:
    print(f"[{datetime.now(UTC).strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def kafka_broker(workdir: Path):
    """testbed/kafka_broker.py's KafkaBroker (the one `make dev` and the tests start) in ``workdir``."""
    from testbed.kafka_broker import KafkaBroker

    return KafkaBroker(workdir=workdir)
