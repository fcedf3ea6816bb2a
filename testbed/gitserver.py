"""A Git server over smart HTTP on loopback, for the GitOps tier: git's own http-backend (the CGI
program Debian's git ships) behind Python's HTTP server, so that Flux's source-controller and Argo
CD's repo server clone from a real Git remote that a test commits to."""

from __future__ import annotations

import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HTTP_BACKEND = Path("/usr/lib/git-core/git-http-backend")


class GitServer:
    """Serves every bare repository under ``root`` at ``http://127.0.0.1:<port>/<name>.git``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self._server: ThreadingHTTPServer | None = None

    def __enter__(self) -> GitServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> GitServer:
        if not HTTP_BACKEND.exists():
            raise FileNotFoundError(f"{HTTP_BACKEND} not found: install Debian's git")
        root = self.root

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._backend()

            def do_POST(self) -> None:
                self._backend()

            def _backend(self) -> None:
                path, _, query = self.path.partition("?")
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                env = {"GIT_PROJECT_ROOT": str(root), "GIT_HTTP_EXPORT_ALL": "1", "PATH_INFO": path,
                       "QUERY_STRING": query, "REQUEST_METHOD": self.command, "REMOTE_ADDR": "127.0.0.1",
                       "CONTENT_TYPE": self.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(body)),
                       "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                       "GIT_PROTOCOL": self.headers.get("Git-Protocol", "")}  # fmt: skip
                done = subprocess.run([str(HTTP_BACKEND)], input=body, env=env, capture_output=True, check=False)
                head, _, payload = done.stdout.partition(b"\r\n\r\n")
                status, headers = 200, []
                for line in head.decode("latin-1").split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.lower() == "status":
                        status = int(value.strip().split()[0])
                    elif name:
                        headers.append((name, value.strip()))
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:  # the tests' output is theirs
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, name="git-http", daemon=True).start()
        return self

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the Git server is not started")
        return self._server.server_address[1]

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}.git"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class Repository:
    """A working tree whose commits are pushed to a bare repository the server serves."""

    def __init__(self, server: GitServer, name: str, work: Path) -> None:
        self.url = server.url(name)
        self.bare = server.root / f"{name}.git"
        self.work = work
        self._git("init", "--bare", "--initial-branch=main", str(self.bare), cwd=server.root)
        self.work.mkdir(parents=True, exist_ok=True)
        self._git("init", "--initial-branch=main", cwd=self.work)
        self._git("remote", "add", "origin", str(self.bare), cwd=self.work)

    def commit(self, files: dict[str, str | None], message: str) -> str:
        """Writes (or, for None, removes) ``files`` and pushes them as one commit: its sha."""
        for relative, text in files.items():
            path = self.work / relative
            if text is None:
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink(missing_ok=True)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        self._git("add", "--all", cwd=self.work)
        self._git("-c", "user.name=streamq tests", "-c", "user.email=tests@streamq.invalid", "commit", "--quiet",
                  "--allow-empty", "-m", message, cwd=self.work)  # fmt: skip
        self._git("push", "--quiet", "origin", "main", cwd=self.work)
        return self._git("rev-parse", "HEAD", cwd=self.work).strip()

    @staticmethod
    def _git(*args: str, cwd: Path) -> str:
        return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout
