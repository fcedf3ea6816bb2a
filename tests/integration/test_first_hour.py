"""A new user's first hour, through a pseudo-terminal as a person would see it.

`hack/run.sh` on the default spec and `make dev` (`hack/run.sh --dev`: the local fraud loop) are started
on a pty, in their own process group like a shell's foreground job; Ctrl-C is SIGINT to
that group. Real Spark, a real broker from the cached jars; nothing stands in for them.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import threading
import uuid
from pathlib import Path

import pytest
import yaml

from contract import ExitCode
from testbed.kafka_broker import _port_is_free
from testbed.wait import wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
NOISE = ("Traceback", "Exception", "ERROR")


class Terminal:
    """A command on a pseudo-terminal; everything it prints, as the screen shows it."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None):
        self.mark = uuid.uuid4().hex  # in the environment of every process it starts
        main, child = os.openpty()
        self.proc = subprocess.Popen(args, cwd=ROOT, stdin=child, stdout=child, stderr=child, start_new_session=True,
                                     env={**os.environ, **(env or {}), "STREAMQ_TEST_MARK": self.mark})  # fmt: skip
        os.close(child)
        self._main = main
        self._chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            ready, _, _ = select.select([self._main], [], [], 0.2)
            if not ready:
                if self.proc.poll() is not None:
                    return
                continue
            try:
                data = os.read(self._main, 65536)
            except OSError:  # the other side closed: every writer is gone
                return
            if not data:
                return
            self._chunks.append(data)

    @property
    def screen(self) -> str:
        return ANSI.sub("", b"".join(self._chunks).decode(errors="replace")).replace("\r\n", "\n")

    def wait_for_text(self, pattern: str, timeout: float, count: int = 1) -> str:
        def seen():
            if self.proc.poll() is not None:
                raise AssertionError(f"exited with {self.proc.returncode} before {pattern!r}:\n{self.screen[-6000:]}")
            return len(re.findall(pattern, self.screen, re.M)) >= count

        wait_for(seen, timeout, lambda: f"{count} x {pattern!r} on the screen:\n{self.screen[-6000:]}", interval=1)
        return self.screen

    def ctrl_c(self) -> None:
        os.killpg(self.proc.pid, signal.SIGINT)  # what the terminal does: the whole foreground group

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(10)
        return code

    def leftovers(self) -> list[str]:
        """Processes still running with this command's mark in their environment, once given
        a moment: a JVM leaves a few seconds after its Python parent (its stdin closes)."""
        try:
            wait_for(lambda: not self._marked(), 30, "the command's processes to exit", interval=0.5)
        except AssertionError:
            pass
        return self._marked()

    def _marked(self) -> list[str]:
        found = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                if f"STREAMQ_TEST_MARK={self.mark}".encode() in (proc / "environ").read_bytes():
                    command = (proc / "cmdline").read_bytes().replace(b"\0", b" ")[:200]
                    found.append(f"{proc.name}: {command!r}")
            except OSError:
                continue
        return found

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        os.close(self._main)


def assert_quiet(screen: str) -> None:
    noisy = [line for line in screen.splitlines() if any(word in line for word in NOISE)]
    assert not noisy, "\n".join(noisy[:20]) + f"\n--- screen ---\n{screen[-6000:]}"


def test_the_local_fraud_loop_shows_flagged_payments_and_stops_cleanly_on_ctrl_c():
    term = Terminal([str(ROOT / "hack" / "run.sh"), "--dev", "--rate", "40"])
    try:
        screen = term.wait_for_text(r"^broker 127\.0\.0\.1:\d+", timeout=180)
        port, controller = map(
            int, re.search(r"^broker 127\.0\.0\.1:(\d+) \(controller 127\.0\.0\.1:(\d+)\)", screen, re.M).groups()
        )
        # Within seconds of the query's start (the JVM's own start is slow on a busy machine).
        term.wait_for_text(r"^flagged  p\d+ card-\d+ amount .* latency \d+ ms$", timeout=300, count=3)
        term.wait_for_text(r"^latency  continuous: p50 \d+ ms, p99 \d+ ms", timeout=60)
        term.ctrl_c()
        assert term.wait(120) == ExitCode.OK, term.screen[-6000:]
    finally:
        term.kill()
    screen = term.screen
    assert_quiet(screen)
    assert re.search(r"query stopped: SIGTERM received; committed epoch \d+, offsets \{\"payments\"", screen), screen[-3000:]
    assert "stopped: the query, the feed and the broker" in screen
    assert _port_is_free(port) and _port_is_free(controller)
    assert term.leftovers() == []


def test_run_sh_on_the_default_spec_stops_on_ctrl_c_without_a_stack_trace(tmp_path):
    spec = yaml.safe_load((ROOT / "examples" / "rate-to-console.yaml").read_text())
    spec["spec"]["checkpoint"]["location"] = str(tmp_path / "checkpoint")  # the default spec, its own checkpoint
    path = tmp_path / "rate-to-console.yaml"
    path.write_text(yaml.safe_dump(spec))
    term = Terminal([str(ROOT / "hack" / "run.sh"), str(path)])
    try:
        term.wait_for_text(r"^\|\d{4}-\d\d-\d\d [\d:.]+ *\|\d+ *\|\d+ *\|$", timeout=300)  # a row of the console sink
        term.wait_for_text(r"^\d\d:\d\d:\d\d rate-to-console: continuous epoch \d+, [\d.]+ rows/s, lag \d+, Healthy$", timeout=60)
        term.ctrl_c()
        assert term.wait(120) == ExitCode.OK, term.screen[-6000:]
    finally:
        term.kill()
    screen = term.screen
    assert_quiet(screen)
    assert re.search(r"query stopped: SIGINT received; committed epoch \d+, offsets \{\"0\":\{\"runTimeMs\"", screen), screen[
        -3000:
    ]
    assert '{"batchId"' not in screen  # on a terminal: lines for people, not the operator's JSON
    assert term.leftovers() == []


def test_validate_spark_prints_only_the_refusal_naming_the_transform(tmp_path):
    spec = yaml.safe_load((ROOT / "examples" / "rate-to-console.yaml").read_text())
    spec["spec"]["transforms"][1] = {"withColumn": {"name": "doubled", "expr": "amount * 2"}}  # no such column
    path = tmp_path / "unknown-column.yaml"
    path.write_text(yaml.safe_dump(spec))
    term = Terminal([str(ROOT / ".venv" / "bin" / "streamq"), "validate", "--spark", str(path)])
    try:
        assert term.wait(300) == ExitCode.QUERY_REFUSED, term.screen
    finally:
        term.kill()
    lines = [line for line in term.screen.splitlines() if line.strip()]
    assert len(lines) == 2, term.screen
    assert lines[0] == f"invalid {path}: 1 problem(s)"
    assert lines[1].startswith("  - spec.transforms[1]: Spark refuses the query: [UNRESOLVED_COLUMN")
    assert "`amount`" in lines[1]
