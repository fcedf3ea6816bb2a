"""One writer on the terminal while a query runs, so progress lines never tear a table.

Spark's console sink prints each epoch/batch as a block of lines from the JVM, and
the JVM writes to the file descriptors it inherited. ``Terminal`` points fds 1 and 2
at a pipe before the JVM starts, copies what comes through to the real terminal,
and writes the job's own lines (progress, logs) only between the sink's blocks: a
block ends with an empty line, or when the JVM has been quiet for a moment.

Only for people at a terminal: with JSON output the streams are left alone.
"""

from __future__ import annotations

import os
import select
import threading
import time

QUIET_S = 0.3  # the JVM wrote nothing for this long: not in the middle of a block
PATIENCE_S = 3.0  # a line waits at most this long for a block to end


def at_boundary(tail: bytes, quiet_for: float) -> bool:
    """May a line go out now, after output that ended with ``tail``?"""
    if not tail or tail.endswith(b"\n\n"):
        return True
    return tail.endswith(b"\n") and quiet_for >= QUIET_S


class Terminal:
    def __init__(self, fds: tuple[int, ...] = (1, 2)):
        self.fds = fds
        self._saved: dict[int, int] = {}
        self._lock = threading.Lock()
        self._tail = b""
        self._last_data = 0.0
        self._pending: list[tuple[float, bytes]] = []
        self._partial = ""
        self._read_fd: int | None = None
        self._thread: threading.Thread | None = None
        self._out: int | None = None

    # --- the relay ------------------------------------------------------------------
    def start(self) -> Terminal:
        self._out = os.dup(self.fds[0])
        for fd in self.fds:
            self._saved[fd] = os.dup(fd)
        read_fd, write_fd = os.pipe()
        for fd in self.fds:
            os.dup2(write_fd, fd)
        os.close(write_fd)
        self._read_fd = read_fd
        self._thread = threading.Thread(target=self._relay, name="streamq-terminal", daemon=True)
        self._thread.start()
        return self

    def _relay(self) -> None:
        read_fd = self._read_fd
        while True:
            ready, _, _ = select.select([read_fd], [], [], 0.1)
            if ready:
                try:
                    data = os.read(read_fd, 65536)
                except OSError:
                    return
                if not data:  # every writer is gone
                    self._flush(force=True)
                    return
                with self._lock:
                    self._write(data)
                    self._last_data = time.monotonic()
            self._flush()

    def _write(self, data: bytes) -> None:
        os.write(self._out, data)
        self._tail = (self._tail + data)[-2:]

    def _flush(self, force: bool = False) -> None:
        with self._lock:
            if not self._pending:
                return
            now = time.monotonic()
            waited = now - self._pending[0][0]
            if force or at_boundary(self._tail, now - self._last_data) or waited >= PATIENCE_S:
                if not self._tail.endswith(b"\n") and self._tail:
                    self._write(b"\n")
                for _, line in self._pending:
                    self._write(line)
                self._pending.clear()

    def close(self) -> None:
        """Give the terminal back: what the job prints from now on goes straight out."""
        if self._read_fd is None:
            return
        time.sleep(QUIET_S)  # let the relay copy what the JVM wrote last
        for fd, saved in self._saved.items():
            os.dup2(saved, fd)
            os.close(saved)
        self._flush(force=True)
        self._read_fd = None  # the relay keeps draining the pipe until the JVM exits

    # --- a stream for the job's own lines (print(file=...), logging) ------------------
    def write(self, text: str) -> int:
        if self._read_fd is None:
            os.write(self.fds[0], text.encode())
            return len(text)
        with self._lock:
            self._partial += text
            *lines, self._partial = self._partial.split("\n")
            now = time.monotonic()
            self._pending.extend((now, (line + "\n").encode()) for line in lines)
        self._flush()
        return len(text)

    def flush(self) -> None:
        pass
