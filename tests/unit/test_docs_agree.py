"""The README shows what the code prints: the `kubectl get sq` columns, the quick start's
two commands, and the trigger table's latency figures from the results file it cites."""

import json
import re
from pathlib import Path

import pytest

from controller.crd import PRINTER_COLUMNS

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_the_kubectl_get_sample_has_the_crds_default_columns():
    header = re.search(r"\$ kubectl (?:-n \S+ )?get sq\n(.+)\n", README)[1].split()
    default = [c["name"].upper() for c in PRINTER_COLUMNS if not c.get("priority")]
    assert header == ["NAME", *default]


def test_the_quick_start_has_exactly_two_commands():
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(?:sh|bash)\n(.*?)```", quick, re.S)
    commands = [line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines()]
    commands = [c for c in commands if c]
    assert commands == ["make run", "make test"], commands


def ms(value: float) -> str:
    """How the README writes a latency: 1 decimal under 10 ms, whole ms above."""
    return f"{value:.1f}" if value < 10 else f"{value:,.0f}"


def test_the_trigger_table_quotes_the_results_file_it_cites():
    cited = re.search(r"\| trigger \| latency measured here \(.*?`(bench/results/latency-[^`]+\.json)`", README)
    assert cited, "the trigger table names the results file its figures come from"
    cells = json.loads((ROOT / cited[1]).read_text())["cells"]
    rows = {m[1]: m[2] for m in re.finditer(r"^\| `(\w+): [^|]*\| ([^|]*?) ms", README, re.M)}
    assert {"realTime", "continuous", "microBatch"} <= rows.keys(), rows
    for mode, shown in rows.items():
        cell = cells[mode]["10000"]["measured"]
        assert shown.strip().startswith(f"{ms(cell['p50']['median'])} / {ms(cell['p99']['median'])}"), (mode, shown)


def sample_lines(text: str) -> list[str]:
    return [line for block in re.findall(r"```console\n(.*?)```", text, re.S) for line in block.splitlines()]


DOCS = README + (ROOT / "docs" / "user-guide.md").read_text()
PROGRESS = re.compile(r"^(\d\d:\d\d:\d\d) ([\w-]+): (\w+) (epoch|batch) (\d+), ([\d.,]+) rows/s, lag ([\d,]+), (\w+)$")


def test_progress_lines_in_the_docs_are_what_the_job_prints():
    from app.console.lines import progress_line
    from contract.progress import ProgressRecord

    shown = [m for m in map(PROGRESS.match, sample_lines(DOCS)) if m]
    assert shown, "the docs show a progress line"
    for m in shown:
        clock, query, mode, _, batch, rate, lag, state = m.groups()
        record = {"timestamp": f"2026-11-23T{clock}.000Z", "query": query, "mode": mode, "batchId": int(batch),
                  "processedRowsPerSecond": float(rate.replace(",", "")), "totalLag": int(lag.replace(",", "")),
                  "health": {"state": state}}  # fmt: skip
        assert progress_line(ProgressRecord.model_validate(record)) == m[0]


def test_the_dev_loops_lines_in_the_docs_are_what_it_prints():
    from devtools.payments import flagged_line, latency_line

    lines = sample_lines(DOCS)
    flagged = [re.match(r"flagged  (\S+) (\S+) amount +([\d,.]+)  latency (\d+) ms$", line) for line in lines]
    flagged = [m for m in flagged if m]
    assert flagged, "the docs show flagged payments"
    for m in flagged:
        value = json.dumps({"id": m[1], "card": m[2], "amount": float(m[3].replace(",", ""))})
        assert flagged_line(value, int(m[4])) == m[0]
    for line in lines:
        summary = re.match(r"latency  (\w+): p50 (\d+) ms, p99 (\d+) ms, max (\d+) ms over (\d+) flagged$", line)
        if summary:
            mode, p50, p99, top, n = summary.groups()
            latencies = [int(p50)] * (int(n) - 1) + [int(top)]
            assert latency_line(mode, latencies) == line


def test_stop_lines_in_the_docs_name_what_each_mode_commits():
    from app.console.lines import unit

    stops = [re.search(r"query stopped: SIG(INT|TERM) received; committed (epoch|batch) \d+, offsets \{.*\} in \S+$", line)
             for line in sample_lines(DOCS) if "query stopped" in line]  # fmt: skip
    assert stops and all(stops), "every stop line has the shape the job prints"
    mode_of = {"epoch": "continuous", "batch": "realTime"}
    assert all(unit(mode_of[m[2]]) == m[2] for m in stops)


def test_the_security_pages_validate_sample_is_what_validate_prints(tmp_path):
    """docs/security.md shows `streamq validate` refusing an image and spark.master: run it."""
    import subprocess
    import sys

    from testbed.specs import RATE_TO_CONSOLE, query_spec, write_resource

    sample = re.search(r"```console\n(.*?)```", (ROOT / "docs" / "security.md").read_text(), re.S)[1]
    shown = [line.strip() for line in sample.splitlines() if line.strip().startswith(("invalid", "- spec."))]
    spec = query_spec(RATE_TO_CONSOLE, **{"runtime.image": "evil.io/x:1", "runtime.sparkConf": {"spark.master": "local[64]"}})
    path = write_resource(tmp_path / "query.yaml", "evil", spec)
    out = subprocess.run([sys.executable, "-c", "from app.cli.commands import main; main()", "validate", str(path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)  # fmt: skip
    printed = [line.strip() for line in (out.stdout + out.stderr).splitlines()]
    assert out.returncode != 0
    assert shown[0].split(":", 1)[1] == printed[0].split(":", 1)[1]  # "invalid <file>: 2 problem(s)"
    assert shown[1:] == printed[1:], printed


def test_the_readmes_layout_names_every_top_level_folder_and_only_folders_that_exist():
    """README's Layout block: each `name/` at a line's start is a folder of the tree, every folder with
    tracked files is there, and each `name/` it mentions under a folder exists in it."""
    import subprocess

    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Layout\n\n```\n", 1)[1].split("```", 1)[0]
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    folders = {path.split("/", 1)[0] for path in tracked if "/" in path}
    listed, current = {}, None
    for line in block.splitlines():
        head = re.match(r"([.\w-]+)/?\S*\s", line)
        if head and not line.startswith(" "):
            current = head.group(1)
            listed[current] = line
        elif current:
            listed[current] += line
    assert folders <= set(listed), f"folders the Layout leaves out: {sorted(folders - set(listed))}"
    for top, text in listed.items():
        assert (ROOT / top).exists(), f"the Layout names {top}/, which is not in the tree"
        for sub in re.findall(r"(?<![\w./-])([a-z_]+)/(?=[\s(:,;])", text.split(None, 1)[1]):
            found = (ROOT / sub).is_dir() or any(d.is_dir() for d in (ROOT / top).rglob(sub)) if (ROOT / top).is_dir() else False
            assert found, f"the Layout names {top}/…{sub}/, which is not in the tree"


def test_the_architecture_page_lists_every_module_of_the_operator():
    """docs/architecture.md: the operator's table names each `controller/**.py` by path (render/'s by
    file name, in its own table), and names no module that does not exist."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    operator = text.split("## The operator (`controller/`)", 1)[1].split("\n## ", 1)[0]
    render = text.split("### What the operator creates: `controller/render/`", 1)[1].split("\n## ", 1)[0]
    modules = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "controller").rglob("*.py"))
    missing = [m for m in modules if not m.startswith("controller/render/") and f"`{m}`" not in operator]
    missing += [m for m in modules if m.startswith("controller/render/") and f"`{Path(m).name}`" not in render]
    assert not missing, f"modules docs/architecture.md does not list: {missing}"
    named = set(re.findall(r"`(controller/[\w/]+\.py)`", operator))
    assert named <= set(modules), f"docs/architecture.md names modules that do not exist: {sorted(named - set(modules))}"
    for name in re.findall(r"^\| `(\w+\.py)`", render, flags=re.M):
        assert f"controller/render/{name}" in modules, f"render/'s table names {name}, which does not exist"
