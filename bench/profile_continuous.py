"""Where a continuous-mode query spends its time: one profiled run of the latency benchmark.

    .venv/bin/python -m bench.profile_continuous                       # 10k/s, continuous, defaults
    .venv/bin/python -m bench.profile_continuous --mode realTime       # the same for real-time mode
    .venv/bin/python -m bench.profile_continuous --mode continuousStreamq   # through streamq's own reader
    .venv/bin/python -m bench.profile_continuous --conf k=v --source-option k=v   # profile a setting

It starts what ``bench.latency`` starts (a broker on loopback, the job as it ships,
the harness's producer and consumer processes), sends at --rate for --warmup seconds
and then profiles a --window of the same steady stream with tools that the machine's
load does not invalidate:

* per thread, from /proc/<pid>/task/<tid>/schedstat: CPU seconds and seconds spent
  runnable without a CPU, for the job's JVM (thread names from ``jcmd Thread.print``),
  its Python driver, the broker and the harness's producer and consumer processes;
* how many threads of each process are runnable (state R), sampled every 20 ms;
* a JFR recording of the job's JVM (``jcmd JFR.start``, the ``profile`` settings with
  park/wait thresholds at 0): CPU samples per thread and top frames, parks and
  monitor waits per thread, GC pauses;
* py-spy (if installed) on the job's Python driver: what the watchdog and py4j cost;
* tcpdump (if installed) of the broker port: Kafka requests per second by API and
  client id (what the job's consumers and producer ask the broker, and how often);
* latency of the window as bench.latency computes it, and ``uptime`` before and after.

The summary is printed and written as JSON (--out, default bench/results/attribution/);
large artifacts (JFR, pcap, py-spy raw) stay in --workdir (default /tmp/latency-work).
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any, Literal

import typer

from bench import cli, reader_trace
from bench.common import RESULTS_DIR, LoadSampler, kafka_broker, log, now_iso, set_autogroup_nice, utc_stamp
from bench.latency import STREAMQ_READER_PATHS, ModeRun
from devtools.payments import percentile

ATTR_DIR = RESULTS_DIR / "attribution"
KAFKA_APIS = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    18: "ApiVersions",
    19: "CreateTopics",
    22: "InitProducerId",
    32: "DescribeConfigs",
    60: "DescribeCluster",
    68: "ConsumerGroupHeartbeat",
}


def uptime() -> str:
    return Path("/proc/loadavg").read_text().strip()


# ------------------------------------------------------------------ threads from /proc


def threads(pid: int) -> dict[int, tuple[str, float, float, int]]:
    """tid -> (comm, on-CPU s, runnable-waiting s, voluntary context switches: how often it blocked)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            comm = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            run_ns, wait_ns, _ = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
            status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
            vcs = int(status.split("voluntary_ctxt_switches:")[1].split()[0])
        except (OSError, ValueError, IndexError):
            continue
        out[int(tid)] = (comm, int(run_ns) / 1e9, int(wait_ns) / 1e9, vcs)
    return out


def children_cpu_s(pid: int) -> float:
    """CPU seconds of a process's children that it has waited for (cutime + cstime): short-lived helpers."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def runnable(pid: int) -> list[int]:
    rs = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            except OSError:
                continue
            if stat[stat.rindex(")") + 2] == "R":
                rs.append(int(tid))
    except OSError:
        pass
    return rs


def java_thread_names(pid: int) -> dict[int, str]:
    """tid -> Java thread name, from jcmd Thread.print (nid=0x...)."""
    try:
        text = subprocess.run(["jcmd", str(pid), "Thread.print"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    names = {}
    for m in re.finditer(r'^"(.+?)".*?nid=0x([0-9a-f]+)', text, re.M):
        names[int(m.group(2), 16)] = m.group(1)
    return names


def group_name(name: str) -> str:
    """Thread names with their numbers and ids folded: one row per kind of thread."""
    name = re.sub(r"--[0-9a-f-]{20,}", "--<id>", name)
    name = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", name)
    name = re.sub(r"\d+", "N", name)
    return name


PHASES = 10  # 100 ms phases of the wall clock's second: continuous epochs start on whole seconds


class ProcWatch(threading.Thread):
    """Samples which threads are runnable, every period_s, until stopped: over the window, and by the
    100 ms phase of the wall clock's second the sample fell in (what runs or waits for a CPU right
    after an epoch boundary, against the rest of the second)."""

    def __init__(self, pids: dict[str, int], period_s: float = 0.02):
        super().__init__(daemon=True)
        self.pids, self.period_s = pids, period_s
        self.counts: dict[str, collections.Counter] = {k: collections.Counter() for k in pids}
        self.total: dict[str, int] = collections.Counter()
        self.samples = 0
        self.by_phase: dict[str, collections.Counter] = {k: collections.Counter() for k in pids}  # (tid, phase)
        self.phase_samples: collections.Counter = collections.Counter()
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.period_s):
            self.samples += 1
            phase = int(time.time() % 1 * PHASES)
            self.phase_samples[phase] += 1
            for role, pid in self.pids.items():
                rs = runnable(pid)
                self.total[role] += len(rs)
                self.counts[role].update(rs)
                self.by_phase[role].update((tid, phase) for tid in rs)

    def stop(self) -> None:
        self._halt.set()
        self.join(5)


def runnable_by_phase(by_phase: collections.Counter, phase_samples: collections.Counter, names: dict[int, str],
                      comms: dict[int, str], top: int = 8) -> dict[str, Any]:  # fmt: skip
    """Mean runnable threads (on a CPU or waiting for one) by 100 ms phase of the second, for a process and
    for its kinds of thread, the ones most runnable in the first 200 ms against the rest first: who holds or
    wants the CPUs right after an epoch boundary."""
    groups: dict[str, list[float]] = collections.defaultdict(lambda: [0.0] * PHASES)
    for (tid, phase), n in by_phase.items():
        groups[group_name(names.get(tid) or comms.get(tid) or str(tid))][phase] += n
    mean = {g: [round(v[p] / phase_samples[p], 3) if phase_samples[p] else 0.0 for p in range(PHASES)]
            for g, v in groups.items()}  # fmt: skip

    def excess(row: list[float]) -> float:
        return sum(row[:2]) / 2 - sum(row[2:]) / (PHASES - 2)

    total = [round(sum(row[p] for row in mean.values()), 3) for p in range(PHASES)]
    rows = sorted(mean.items(), key=lambda kv: -excess(kv[1]))[:top]
    return {"all": total, "samplesByPhase": [phase_samples[p] for p in range(PHASES)],
            "threads": [{"thread": g, "byPhase": row, "first200msExcess": round(excess(row), 3)} for g, row in rows]}  # fmt: skip


def thread_table(before: dict, after: dict, names: dict[int, str], window_s: float, runnable_counts: collections.Counter,
                 samples: int) -> list[dict[str, Any]]:  # fmt: skip
    rows: dict[str, dict[str, float]] = {}
    for tid, (comm, cpu1, wait1, vcs1) in after.items():
        comm0, cpu0, wait0, vcs0 = before.get(tid, (comm, 0.0, 0.0, 0))
        g = group_name(names.get(tid, comm))
        r = rows.setdefault(g, {"threads": 0, "cpuS": 0.0, "waitS": 0.0, "runnableAvg": 0.0, "blocks": 0})
        r["threads"] += 1
        r["cpuS"] += cpu1 - cpu0
        r["waitS"] += wait1 - wait0
        r["blocks"] += vcs1 - vcs0
        r["runnableAvg"] += runnable_counts.get(tid, 0) / max(samples, 1)
    out = [{"thread": g, "threads": int(v["threads"]), "cpuCores": round(v["cpuS"] / window_s, 3),
            "waitingForCpu": round(v["waitS"] / window_s, 3), "runnableAvg": round(v["runnableAvg"], 3),
            "blocksPerS": round(v["blocks"] / window_s, 1)}
           for g, v in rows.items()]  # fmt: skip
    return sorted(out, key=lambda r: -(r["cpuCores"] + r["waitingForCpu"]))


# ------------------------------------------------------------------ JFR

JFC_OVERRIDES = {"jdk.ThreadPark": "0 ms", "jdk.JavaMonitorWait": "0 ms", "jdk.JavaMonitorEnter": "0 ms",
                 "jdk.SocketRead": "0 ms", "jdk.SocketWrite": "0 ms"}  # fmt: skip


# --jfr-compiles: the JDK's low-overhead settings (no park, wait or socket events: those perturbed a run into
# falling behind), with every JIT compilation and deoptimization recorded: what the compilers do right after an
# epoch boundary, where the runnable threads by phase found them busy.
LIGHT_JFC_OVERRIDES = {"jdk.Compilation": "0 ms"}


def make_jfc(workdir: Path, light: bool = False) -> Path:
    java_home = Path(os.path.realpath(shutil.which("java"))).parents[1]
    text = (java_home / "lib" / "jfr" / ("default.jfc" if light else "profile.jfc")).read_text()
    for event, threshold in (LIGHT_JFC_OVERRIDES if light else JFC_OVERRIDES).items():
        text = re.sub(rf'(<event name="{event}">.*?<setting name="threshold"[^>]*>)[^<]*(</setting>)',
                      rf"\g<1>{threshold}\g<2>", text, flags=re.S)  # fmt: skip
    for event in ("jdk.ExecutionSample", "jdk.NativeMethodSample"):
        text = re.sub(rf'(<event name="{event}">.*?<setting name="period"[^>]*>)[^<]*(</setting>)',
                      r"\g<1>10 ms\g<2>", text, flags=re.S)  # fmt: skip
    path = workdir / "streamq-profile.jfc"
    path.write_text(text)
    return path


def jfr_events(jfr: Path, event: str, depth: int = 12) -> list[dict]:
    out = subprocess.run(["jfr", "print", "--json", "--stack-depth", str(depth), "--events", event, str(jfr)],
                         capture_output=True, text=True, timeout=600).stdout  # fmt: skip
    try:
        return json.loads(out)["recording"]["events"]
    except (ValueError, KeyError):
        return []


def frame_name(frame: dict) -> str:
    m = frame.get("method", {})
    t = m.get("type", {}).get("name", "?").rsplit(".", 1)[-1]
    return f"{t}.{m.get('name', '?')}:{frame.get('lineNumber', '')}"


def first_own_frame(frames: list[dict]) -> str:
    """The first frame that is not the JDK's: where Spark/Kafka code asked for the time."""
    for f in frames:
        t = f.get("method", {}).get("type", {}).get("name", "")
        if not t.startswith(("java.", "jdk.", "sun.")):
            return frame_name(f)
    return frame_name(frames[0]) if frames else "?"


def duration_ms(value: Any) -> float:
    if isinstance(value, (int, float)):
        return float(value) / 1e6
    m = re.match(r"PT(?:(\d+)H)?(?:(\d+)M)?(?:([\d.]+)S)?", str(value))
    if not m:
        return 0.0
    h, mi, s = (float(x) if x else 0.0 for x in m.groups())
    return (h * 3600 + mi * 60 + s) * 1000


def thread_of(event: dict) -> str:
    v = event["values"]
    t = v.get("sampledThread") or v.get("eventThread") or {}
    return (t or {}).get("javaName") or (t or {}).get("osName") or "?"


def summarise_jfr(jfr: Path, window_s: float) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    samples = jfr_events(jfr, "jdk.ExecutionSample")
    by_thread: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    per_thread = collections.Counter()
    for e in samples:
        g = group_name(thread_of(e))
        frames = (e["values"].get("stackTrace") or {}).get("frames") or []
        per_thread[g] += 1
        by_thread[g][" < ".join(frame_name(f) for f in frames[:4])] += 1
    summary["executionSamples"] = {
        "total": len(samples),
        "note": "a sample every 10 ms per thread that was running Java code (state RUNNABLE, on CPU)",
        "byThread": [{"thread": g, "samples": n, "share": round(n / max(len(samples), 1), 3),
                      "topStacks": [[s, c] for s, c in by_thread[g].most_common(4)]}
                     for g, n in per_thread.most_common(14)],
    }  # fmt: skip
    for event, key in (("jdk.ThreadPark", "parks"), ("jdk.JavaMonitorWait", "monitorWaits"),
                       ("jdk.SocketRead", "socketReads")):  # fmt: skip
        evs = jfr_events(jfr, event)
        agg: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
        for e in evs:
            frames = (e["values"].get("stackTrace") or {}).get("frames") or []
            agg[(group_name(thread_of(e)), first_own_frame(frames))].append(duration_ms(e["values"].get("duration")))
        rows = [{"thread": t, "at": at, "count": len(d), "perS": round(len(d) / window_s, 1),
                 "totalMs": round(sum(d), 1), "medianMs": round(percentile(d, 50), 3)}
                for (t, at), d in agg.items()]  # fmt: skip
        summary[key] = sorted(rows, key=lambda r: -r["count"])[:20]
    # Threads blocked in native code (epoll: waiting for the broker), every 10 ms: where the Kafka
    # consumer of each reader waits, by the Kafka/Spark call that waits.
    natives = jfr_events(jfr, "jdk.NativeMethodSample", depth=40)
    waits: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for e in natives:
        frames = (e["values"].get("stackTrace") or {}).get("frames") or []
        names = [frame_name(f) for f in frames]
        label = next((n for n in names if n.startswith(("KafkaConsumer.", "KafkaProducer.", "InternalKafkaConsumer."))), None)
        if label is None:
            label = next((n for n in names if not n.startswith(("EPoll", "SelectorImpl", "EPollSelectorImpl", "Selector",
                                                                  "NetworkClient", "ConsumerNetworkClient", "Net.", "IOUtil",
                                                                  "SocketDispatcher", "FileDispatcherImpl"))), "?")  # fmt: skip
        waits[group_name(thread_of(e))][label] += 1
    summary["nativeWaits"] = {
        "note": "samples (every 10 ms) of threads blocked in native code, by the first Kafka API call on the stack; "
                "samples x 10 ms = wall time spent waiting there",
        "byThread": {t: c.most_common(6) for t, c in sorted(waits.items(), key=lambda kv: -sum(kv[1].values()))[:8]},
    }  # fmt: skip
    gcs = jfr_events(jfr, "jdk.GarbageCollection")
    pauses = sorted(duration_ms(e["values"].get("sumOfPauses")) for e in gcs)
    pause_list = [[iso_ns(e["values"].get("startTime")), duration_ms(e["values"].get("sumOfPauses"))] for e in gcs]
    spawns = jfr_events(jfr, "jdk.ProcessStart", depth=40)
    verbs, callers = collections.Counter(), collections.Counter()
    for e in spawns:
        verbs[str(e["values"].get("command", "?")).split(" ")[0]] += 1
        frames = (e["values"].get("stackTrace") or {}).get("frames") or []
        callers[next((frame_name(f) for f in frames if "spark" in f.get("method", {}).get("type", {}).get("name", "")), "?")] += 1
    summary["processStarts"] = {"count": len(spawns), "perS": round(len(spawns) / window_s, 1),
                                "commands": verbs.most_common(6), "sparkCallers": callers.most_common(4)}  # fmt: skip
    summary["compiles"] = compiles_by_phase(jfr_events(jfr, "jdk.Compilation", depth=1),
                                            jfr_events(jfr, "jdk.Deoptimization", depth=1))  # fmt: skip
    summary["gc"] = {"collections": len(gcs), "names": sorted({e["values"].get("name", "?") for e in gcs}),
                     "pauseTotalMs": round(sum(pauses), 1), "pauseMaxMs": round(max(pauses), 2) if pauses else 0,
                     "pauseP50Ms": round(percentile(pauses, 50, presorted=True), 2) if pauses else 0, "pauses": pause_list}  # fmt: skip
    return summary


def compiles_by_phase(compiles: list[dict], deopts: list[dict], top: int = 15) -> dict[str, Any]:
    """JIT compilations and deoptimizations by 100 ms phase of the second they started in, and the methods
    compiled most often in the first 200 ms (a method compiled again and again was thrown away between)."""

    def phase(e: dict) -> int:
        return int(iso_ns(e["values"].get("startTime")) % 10**9 * PHASES // 10**9)

    def method(e: dict) -> str:
        m = e["values"].get("method") or {}
        return f"{(m.get('type') or {}).get('name', '?')}.{m.get('name', '?')}"

    count, ms = [0] * PHASES, [0.0] * PHASES
    early: collections.Counter = collections.Counter()
    everywhere: collections.Counter = collections.Counter()
    for e in compiles:
        p = phase(e)
        count[p] += 1
        ms[p] += duration_ms(e["values"].get("duration"))
        everywhere[method(e)] += 1
        if p < 2:
            early[method(e)] += 1
    deopt = [0] * PHASES
    reasons: collections.Counter = collections.Counter()
    for e in deopts:
        deopt[phase(e)] += 1
        reasons[f"{e['values'].get('reason', '?')} {method(e)}"] += 1
    return {"compiles": len(compiles), "byPhase": count, "compileMsByPhase": [round(x, 1) for x in ms],
            "deoptimizations": len(deopts), "deoptsByPhase": deopt, "topDeopts": reasons.most_common(top),
            "first200msTop": [[m, n, everywhere[m]] for m, n in early.most_common(top)]}  # fmt: skip


def iso_ns(text: Any) -> int:
    from datetime import datetime

    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z?", str(text))
    if not m:
        return 0
    base = datetime.strptime(m.group(1) + "+0000", "%Y-%m-%dT%H:%M:%S%z").timestamp()
    return int(base) * 10**9 + int(float(m.group(2) or 0) * 1e9)


def latency_shape(run, wall0: int, wall1: int, gc_pauses: list) -> dict[str, Any]:
    """Latency of the records sent in the window: by the phase of their send time within the second
    (continuous mode's epochs are 1 s: a commit-time cost shows as a hot phase), and how many of the
    slowest 1 % were sent during or just before a GC pause."""
    import numpy as np

    from bench.latency import read_received

    data = read_received(run.received_path)
    d = data[(data[:, 1] >= wall0) & (data[:, 1] < wall1)]
    if not len(d):
        return {}
    lat = (d[:, 2] - d[:, 1]) / 1e6
    phase = ((d[:, 1] // 1_000_000) % 1000) // 100  # 10 bins of 100 ms
    bins = []
    for b in range(10):
        x = np.sort(lat[phase == b])
        if len(x):
            bins.append(
                [b * 100, round(float(percentile(x, 50, presorted=True)), 2), round(float(percentile(x, 99, presorted=True)), 1)]
            )
    ordered = np.sort(lat)
    p99 = percentile(ordered, 99, presorted=True)
    slow = d[lat >= p99]
    near_gc = 0
    for sent in slow[:, 1]:
        if any(start - 200e6 <= sent <= start + ms * 1e6 for start, ms in gc_pauses):
            near_gc += 1
    gc_window_share = min(1.0, sum((200 + ms) * 1e6 for _, ms in gc_pauses) / max(wall1 - wall0, 1))
    return {"records": int(len(d)), "p50": round(float(percentile(ordered, 50, presorted=True)), 2), "p99": round(float(p99), 1),
            "byPhaseOfSecond_ms_p50_p99": bins,
            "slowest1pctNearGc": round(near_gc / max(len(slow), 1), 3),
            "shareOfWindowNearGc": round(gc_window_share, 3)}  # fmt: skip


# ------------------------------------------------------------------ tcpdump: Kafka requests by API and client


def kafka_requests(pcap: Path, broker_port: int, window_s: float) -> dict[str, Any]:
    """Kafka requests seen on the broker port (both directions): how many per second, by API and client
    id, and per API and client the time from a request to its response and between two Fetches of one
    connection. A request is recognised by its header (size, api_key, version, correlation id, client id)
    at the start of a client->broker segment, a response by its correlation id at the start of a
    broker->client segment."""
    data = pcap.read_bytes()
    if len(data) < 24:
        return {}
    endian = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    nano = data[:4] in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    off, counts = 24, collections.Counter()
    pending: dict[tuple[int, int], tuple[str, str, float]] = {}  # (client port, correlation id) -> (api, client, t)
    rtt: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    last_fetch: dict[int, float] = {}
    fetch_gap: dict[str, list[float]] = collections.defaultdict(list)
    seq: dict[int, list[str]] = collections.defaultdict(list)  # per connection: the order of requests
    port_client: dict[int, str] = {}
    while off + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack(endian + "IIII", data[off : off + 16])
        ts = sec + frac / (1e9 if nano else 1e6)
        pkt = data[off + 16 : off + 16 + incl]
        off += 16 + incl
        ip = pkt[14:] if linktype == 1 else pkt[16:] if linktype == 113 else pkt[4:] if linktype == 0 else pkt
        if len(ip) < 20 or ip[0] >> 4 != 4:
            continue
        tcp = ip[(ip[0] & 15) * 4 :]
        if len(tcp) < 20:
            continue
        sport, dport = struct.unpack(">HH", tcp[0:4])
        payload = tcp[(tcp[12] >> 4) * 4 :]
        if dport == broker_port:
            pos = 0
            while pos + 14 <= len(payload):
                size, api, ver, corr, cid_len = struct.unpack(">ihhih", payload[pos : pos + 14])
                if not (0 <= api < 100 and 0 <= ver < 30 and 0 <= cid_len < 200 and size > 0):
                    break
                client = payload[pos + 14 : pos + 14 + cid_len].decode("ascii", "replace")
                client = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "<uuid>", client)
                client = re.sub(r"-\d+$", "-N", client)
                name = KAFKA_APIS.get(api, str(api))
                counts[(name, client)] += 1
                pending[(sport, corr)] = (name, client, ts)
                port_client[sport] = client
                if len(seq[sport]) < 4000:
                    seq[sport].append(name)
                if name == "Fetch":
                    if sport in last_fetch:
                        fetch_gap[client].append((ts - last_fetch[sport]) * 1000)
                    last_fetch[sport] = ts
                pos += 4 + size
        elif sport == broker_port and len(payload) >= 8:
            corr = struct.unpack(">i", payload[4:8])[0]
            hit = pending.pop((dport, corr), None)
            if hit:
                rtt[(hit[0], hit[1])].append((ts - hit[2]) * 1000)

    def dist(values: list[float]) -> dict[str, float]:
        v = sorted(values)
        return {"n": len(v), "p50": round(percentile(v, 50, presorted=True), 3), "p90": round(percentile(v, 90, presorted=True), 3),
                "mean": round(sum(v) / len(v), 3)} if v else {"n": 0}  # fmt: skip

    rows = [{"api": a, "client": c, "count": n, "perS": round(n / window_s, 1), "responseMs": dist(rtt.get((a, c), []))}
            for (a, c), n in counts.items()]  # fmt: skip
    patterns = {}
    for port, names in seq.items():
        grams = collections.Counter(" > ".join(names[i : i + 3]) for i in range(0, max(len(names) - 2, 0)))
        if grams:
            patterns[f"{port_client[port]} (port {port})"] = grams.most_common(3)
    return {"windowS": window_s, "requests": sorted(rows, key=lambda r: -r["count"]),
            "fetchIntervalMs": {c: dist(v) for c, v in fetch_gap.items()},
            "requestSequences": dict(sorted(patterns.items(), key=lambda kv: -kv[1][0][1])[:6])}  # fmt: skip


# ------------------------------------------------------------------ the run


def java_child(pid: int, timeout: float = 60) -> int | None:
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            for p in psutil.Process(pid).children(recursive=True):
                if p.name() == "java" and "SparkSubmit" in " ".join(p.cmdline()):
                    return p.pid
        except psutil.Error:
            return None
        time.sleep(0.5)
    return None


class ProfiledRun(ModeRun):
    """bench.latency's ModeRun, with the job's Spark log level as chosen (the harness uses ERROR, a pod WARN)."""

    log_level = "ERROR"

    def _start_job(self) -> None:
        from testbed.jobs import JobProcess

        super()._start_job()
        if self.log_level != "ERROR":  # start it again with the level asked for
            path = self.job.proc.args[4]
            self.job.stop()
            self.job = JobProcess(Path(path), self.workdir, env={"STREAMQ_SPARK_LOG_LEVEL": self.log_level})


def profile(args) -> dict[str, Any]:
    workdir = Path(args.workdir) / f"profile-{args.mode}-{utc_stamp()}"
    workdir.mkdir(parents=True, exist_ok=True)
    bench_dir = Path(tempfile.mkdtemp(prefix="streamq-profile-"))
    sampler = LoadSampler()
    broker = kafka_broker(bench_dir / "kafka")
    result: dict[str, Any] = {"bench": "profile", "mode": args.mode, "rate": args.rate, "label": args.label,
                              "started": now_iso(), "uptimeAtStart": uptime(), "conf": dict(args.conf),
                              "sparkLogLevel": args.spark_log_level, "autogroupNice": args.autogroup_nice,
                              "sourceOptions": dict(args.source_option), "sinkOptions": dict(args.sink_option),
                              "checkpointInterval": args.checkpoint_interval or "1s",
                              "artifacts": str(workdir)}  # fmt: skip
    run = None
    try:
        broker.start()
        sampler.start()
        trace_path = workdir / "reader-trace.bin"
        ns = SimpleNamespace(conf=args.conf, source_option=args.source_option, sink_option=args.sink_option,
                                partitions=args.partitions, autogroup_nice=0, warmup=args.warmup,
                                measure=args.window, drain_timeout=15.0,
                                checkpoint_interval=args.checkpoint_interval, reader_trace=args.reader_trace,
                                job_env={reader_trace.ENV: str(trace_path)} if args.reader_trace else {})  # fmt: skip
        ProfiledRun.log_level = args.spark_log_level
        run = ProfiledRun(args.mode, broker, bench_dir, ns)
        t = time.monotonic()
        run.start()
        if args.autogroup_nice:
            run.prioritise(args.autogroup_nice)
        log(f"{args.mode} ready after {time.monotonic() - t:.0f}s")
        jvm = java_child(run.job.proc.pid)
        pids = {"jobJvm": jvm, "jobPython": run.job.proc.pid, "broker": broker.pid, "producer": run.producer.pid,
                "consumer": run.consumer.pid}  # fmt: skip
        result["pids"] = pids
        # warm-up and window in one step: profiling starts when the warm-up ends
        box: dict[str, Any] = {}
        stepper = threading.Thread(target=lambda: box.setdefault("step", run.step(args.rate, 0.0, sampler)), daemon=True)
        stepper.start()
        time.sleep(args.warmup)
        result["uptimeWindowStart"] = uptime()
        names = java_thread_names(jvm) if jvm else {}
        (workdir / "jstack-start.txt").write_text(subprocess.run(["jcmd", str(jvm), "Thread.print"], capture_output=True,
                                                                 text=True).stdout if jvm else "")  # fmt: skip
        jfr_path = workdir / "job.jfr"
        if jvm and not args.no_jfr:
            jfc = make_jfc(workdir, light=args.jfr_compiles)
            subprocess.run(["jcmd", str(jvm), "JFR.start", "name=streamq", f"settings={jfc}", f"filename={jfr_path}"],
                           capture_output=True, timeout=60)  # fmt: skip
        tools: list[subprocess.Popen] = []
        if shutil.which("tcpdump") and not args.no_tcpdump:
            port = int(broker.bootstrap.rsplit(":", 1)[1])
            pcap = workdir / "broker.pcap"
            tools.append(subprocess.Popen(["tcpdump", "-i", "lo", "-s", "256", "-U", "-w", str(pcap),
                                           f"tcp port {port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
        pyspy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        pyspy_out = {}
        if Path(pyspy).exists() and not args.no_pyspy:
            for role in ("jobPython", "producer", "consumer"):
                pyspy_out[role] = workdir / f"pyspy-{role}.txt"
                tools.append(subprocess.Popen([pyspy, "record", "--pid", str(pids[role]), "--duration", str(int(args.window)),
                                               "--rate", "100", "--nonblocking", "--format", "raw", "--output",
                                               str(pyspy_out[role])], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
        before = {role: threads(pid) for role, pid in pids.items() if pid}
        children0 = {role: children_cpu_s(pid) for role, pid in pids.items() if pid}
        log0 = run.job.log()
        wall0 = time.time_ns()
        watch = ProcWatch({r: p for r, p in pids.items() if p})
        watch.start()
        t0 = time.monotonic()
        time.sleep(args.window)
        window_s = time.monotonic() - t0
        watch.stop()
        after = {role: threads(pid) for role, pid in pids.items() if pid}
        children1 = {role: children_cpu_s(pid) for role, pid in pids.items() if pid}
        log1 = run.job.log()
        new_lines = log1[len(log0) :].splitlines()
        result["jobLogInWindow"] = {"lines": len(new_lines), "bytes": len(log1) - len(log0),
                                    "notUninterruptibleWarnings": sum("UninterruptibleThread" in ln for ln in new_lines),
                                    "sample": new_lines[:2]}  # fmt: skip
        wall1 = time.time_ns()
        result["uptimeWindowEnd"] = uptime()
        if jvm and not args.no_jfr:
            subprocess.run(["jcmd", str(jvm), "JFR.stop", "name=streamq"], capture_output=True, timeout=120)
        (workdir / "jstack-end.txt").write_text(subprocess.run(["jcmd", str(jvm), "Thread.print"], capture_output=True,
                                                               text=True).stdout if jvm else "")  # fmt: skip
        for p in tools:
            if p.args[0].endswith("tcpdump"):
                p.send_signal(signal.SIGINT)
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
        stepper.join(args.window + 120)
        step = box.get("step", {})
        step.pop("cdf", None)
        result["latency"] = step
        result["windowS"] = round(window_s, 2)
        result["perProcess"] = {
            role: {"threads": len(after[role]),
                   "cpuCores": round(sum(v[1] - before[role].get(t, (0, 0, 0))[1] for t, v in after[role].items()) / window_s, 3),
                   "waitingForCpu": round(sum(v[2] - before[role].get(t, (0, 0, 0))[2] for t, v in after[role].items()) / window_s, 3),
                   "blocksPerS": round(sum(v[3] - before[role].get(t, (0, 0, 0, 0))[3] for t, v in after[role].items()) / window_s, 1),
                   "runnableAvg": round(watch.total[role] / max(watch.samples, 1), 3),
                   "reapedChildrenCpuCores": round((children1[role] - children0[role]) / window_s, 3)}
            for role in after
        }  # fmt: skip
        result["perThread"] = {role: thread_table(before[role], after[role], names if role == "jobJvm" else {}, window_s,
                                                  watch.counts[role], watch.samples)[: args.top]
                               for role in after}  # fmt: skip
        result["runnableByPhase"] = {
            role: runnable_by_phase(watch.by_phase[role], watch.phase_samples, names if role == "jobJvm" else {},
                                    {tid: v[0] for tid, v in after[role].items()})
            for role in after
        }  # fmt: skip
        if jfr_path.exists():
            result["jfr"] = summarise_jfr(jfr_path, window_s)
        result["latencyShape"] = latency_shape(run, wall0, wall1, result.get("jfr", {}).get("gc", {}).get("pauses", []))
        if args.reader_trace:
            time.sleep(2)  # the trace is written at most once a second
            sent = reader_trace.read_output(broker.bootstrap, run.out_topic)
            result["readerTrace"] = reader_trace.summary(
                reader_trace.legs(reader_trace.read_trace(trace_path), sent, (wall0 // 1000, wall1 // 1000))
            )
        pcap = workdir / "broker.pcap"
        if pcap.exists():
            result["kafkaRequests"] = kafka_requests(pcap, int(broker.bootstrap.rsplit(":", 1)[1]), window_s)
        result["pyspy"] = {role: summarise_pyspy(path, args.window) for role, path in pyspy_out.items() if path.exists()}
    finally:
        if run is not None:
            if run.job is not None:
                (workdir / "job.log").write_text(run.job.log()[-200_000:])
            run.close()
        sampler.stop()
        if args.autogroup_nice:
            set_autogroup_nice(os.getpid(), 0)
        broker.stop()
        shutil.rmtree(bench_dir, ignore_errors=True)
    result["uptimeAtEnd"] = uptime()
    return result


def summarise_pyspy(path: Path, duration_s: float) -> dict[str, Any]:
    """py-spy raw (collapsed) stacks: samples of active (non-idle) threads, by thread and leaf frames."""
    by_thread, leaves = collections.Counter(), collections.Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        frames = stack.split(";")
        total += int(n)
        by_thread[group_name(frames[0])] += int(n)
        leaves[" < ".join(reversed([re.sub(r" \(.*?\)", "", f) for f in frames[-3:]]))] += int(n)
    return {"activeSamples": total, "activeCpuSecondsApprox": round(total / 100, 2), "durationS": duration_s,
            "byThread": by_thread.most_common(8), "topLeaves": leaves.most_common(10)}  # fmt: skip


def print_summary(r: dict[str, Any]) -> None:
    lat = r.get("latency", {})
    print(f"\n== {r['mode']} at {r['rate']}/s, window {r.get('windowS')} s; loadavg {r.get('uptimeWindowStart')} -> "
          f"{r.get('uptimeWindowEnd')}")  # fmt: skip
    if lat:
        print(f"latency ms: {lat.get('latencyMs')}; send->Spark write {lat.get('sendToSinkWriteMs')}; "
              f"sustained {lat.get('sustained')} {lat.get('why', '')}")  # fmt: skip
    if r.get("readerTrace"):
        print(f"\nthe engine's leg split at the reader (ms): {r['readerTrace']}")
    print("\nper process (cores used, threads waiting for a CPU, threads runnable on average):")
    for role, v in r.get("perProcess", {}).items():
        print(f"  {role:10} {v}")
    for role, rows in r.get("perThread", {}).items():
        print(f"\n{role}: busiest threads (cpuCores / waitingForCpu / runnableAvg / blocks per s)")
        for row in rows[:12]:
            print(f"  {row['thread'][:70]:70} x{row['threads']:<3} {row['cpuCores']:6.3f} {row['waitingForCpu']:6.3f} "
                  f"{row['runnableAvg']:6.3f} {row['blocksPerS']:8.1f}/s")  # fmt: skip
    for role, v in r.get("runnableByPhase", {}).items():
        print(f"\n{role}: runnable threads by 100 ms phase of the second (the first two follow an epoch boundary)")
        print(f"  {'all':60} {' '.join(f'{x:5.2f}' for x in v['all'])}")
        for row in v["threads"][:5]:
            print(f"  {row['thread'][:60]:60} {' '.join(f'{x:5.2f}' for x in row['byPhase'])}")
    jfr = r.get("jfr", {})
    if jfr:
        print(f"\nJFR execution samples: {jfr['executionSamples']['total']}")
        for row in jfr["executionSamples"]["byThread"][:10]:
            print(f"  {row['share']:.3f} {row['thread'][:60]:60} {row['topStacks'][0][0][:150] if row['topStacks'] else ''}")
        for key in ("parks", "monitorWaits", "socketReads"):
            print(f"\nJFR {key} (thread, first non-JDK frame, per s, median ms, total ms):")
            for row in jfr.get(key, [])[:10]:
                print(
                    f"  {row['thread'][:50]:50} {row['at'][:70]:70} {row['perS']:8.1f}/s {row['medianMs']:8.3f} {row['totalMs']:9.1f}"
                )
        gc = {k: v for k, v in jfr.get("gc", {}).items() if k != "pauses"}
        print(f"\nGC: {gc}")
        print(f"process starts: {jfr.get('processStarts')}")
        c = jfr.get("compiles", {})
        print(f"JIT compiles by phase of the second: {c.get('byPhase')} ({c.get('compileMsByPhase')} ms); "
              f"deoptimizations {c.get('deoptsByPhase')}")  # fmt: skip
        for m, n, total in c.get("first200msTop", [])[:10]:
            print(f"    {n:5} of {total:5} {m[:140]}")
        print("\nJFR native waits (thread: [(Kafka call, samples x 10 ms)]):")
        for t, rows in jfr.get("nativeWaits", {}).get("byThread", {}).items():
            print(f"  {t[:60]:60} {rows[:4]}")
    print(f"\nlatency shape: {r.get('latencyShape')}")
    print(f"job log in the window: {r.get('jobLogInWindow')}")
    kr = r.get("kafkaRequests", {})
    if kr:
        print("\nKafka requests to the broker (per s):")
        for row in kr["requests"][:14]:
            print(f"  {row['api']:12} {row['client'][:70]:70} {row['perS']:9.1f}/s  response {row['responseMs']}")
        print(f"  Fetch intervals per connection (ms): {kr.get('fetchIntervalMs')}")
        for conn, grams in kr.get("requestSequences", {}).items():
            print(f"  {conn[:80]}: {grams}")
    for role, v in r.get("pyspy", {}).items():
        print(f"\npy-spy {role}: ~{v['activeCpuSecondsApprox']} s active in {v['durationS']} s; {v['byThread'][:4]}")
        for leaf, n in v["topLeaves"][:5]:
            print(f"    {n:6} {leaf[:150]}")


# bench.latency's paths that run the job: the triggers, and continuous through streamq's own reader
ProfiledMode = Literal["continuous", "continuousStreamq", "microBatch", "realTime"]


@cli.with_job_options
def main(
    mode: Annotated[ProfiledMode, typer.Option("--mode", help="a bench.latency path that runs the job")] = "continuous",
    rate: cli.Rate = 10_000,
    warmup: Annotated[float, typer.Option(help="seconds at --rate before profiling")] = 40.0,
    window: Annotated[float, typer.Option(help="seconds profiled (and measured)")] = 15.0,
    label: Annotated[str, typer.Option(help="a word for the results file")] = "",
    spark_log_level: Annotated[
        str, typer.Option(help="the job's STREAMQ_SPARK_LOG_LEVEL: ERROR as bench.latency runs it, WARN as a pod runs it")
    ] = "ERROR",
    autogroup_nice: Annotated[int, typer.Option(help="as bench.latency's --autogroup-nice")] = 0,
    top: Annotated[int, typer.Option(help="thread groups kept per process")] = 25,
    workdir: Annotated[str, typer.Option(help="where the profiles and captures are kept")] = "/tmp/latency-work",
    out: Annotated[str, typer.Option(help="the folder of the results file")] = str(ATTR_DIR),
    no_jfr: Annotated[bool, typer.Option("--no-jfr", help="no Java Flight Recorder of the job's JVM")] = False,
    jfr_compiles: Annotated[
        bool, typer.Option("--jfr-compiles", help="JFR with the JDK's default settings and every JIT compile recorded")
    ] = False,
    no_pyspy: Annotated[bool, typer.Option("--no-pyspy", help="no py-spy of the Python processes")] = False,
    no_tcpdump: Annotated[bool, typer.Option("--no-tcpdump", help="no capture of the Kafka traffic")] = False,
    reader_trace: Annotated[
        bool, typer.Option("--reader-trace", help="continuousStreamq: split the engine's leg at the reader (bench.reader_trace)")
    ] = False,
    **job_options: Any,
) -> None:
    args = cli.options(locals())
    if args.reader_trace and mode not in STREAMQ_READER_PATHS:
        raise typer.BadParameter(f"--reader-trace traces streamq's reader: --mode {', '.join(STREAMQ_READER_PATHS)}")
    result = profile(args)
    print_summary(result)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"profile-{args.mode}{'-' + args.label if args.label else ''}-{utc_stamp()}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    log(f"wrote {path} ({path.stat().st_size // 1024} KiB); artifacts in {result['artifacts']}")


if __name__ == "__main__":
    cli.run(main, "bench.profile_continuous", __doc__)
