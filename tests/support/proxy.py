"""Proxies between one client and the kube-apiserver, to inject faults at exact points.

``CuttableProxy`` (TCP) is a network partition, for real: ``cut()`` drops every open
connection and refuses new ones (the client sees its calls fail or time out, as behind
a broken link); ``heal()`` lets them through again.

``InterposingProxy`` (HTTPS) calls a test's ``before(method, path)`` ahead of forwarding
each request and records every answer, so a test acts at an exact point of a client's
conversation (between its read and its write, say) instead of racing it.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from testbed.kube import Pki


class CuttableProxy:
    def __init__(self, target_host: str, target_port: int, host: str = "127.0.0.1"):
        self.target = (target_host, target_port)
        self._listener = socket.create_server((host, 0))
        self.host, self.port = host, self._listener.getsockname()[1]
        self._cut = threading.Event()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._cut.is_set():
                client.close()  # a partition: nothing gets through
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not self._cut.is_set():
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def cut(self) -> None:
        self._cut.set()
        with self._lock:
            for s in self._open:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._open.clear()

    def heal(self) -> None:
        self._cut.clear()

    def close(self) -> None:
        self.cut()
        self._closed.set()
        self._listener.close()


# Per connection, not end to end: never forwarded (RFC 9110 7.6.1).
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"}


class InterposingProxy:
    """An HTTPS proxy in front of the kube-apiserver of ``pki``.

    TLS ends here with the apiserver's own serving certificate, so a client's kubeconfig
    needs only its server changed (``kubeconfig_through``); a bearer token passes through
    untouched (a client certificate would not). One request per connection: a watch
    streams until either side closes it.
    """

    def __init__(self, upstream: str, pki: Pki, host: str = "127.0.0.1"):
        target = urlsplit(upstream)
        self._target = (target.hostname, target.port)
        self._upstream_tls = ssl.create_default_context(cafile=str(pki.ca_cert))
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(str(pki.server_cert), str(pki.server_key))
        self.before: Callable[[str, str], None] = lambda method, path: None  # path without the query
        self.answers: list[tuple[str, str, int]] = []  # (method, path, status), in the order answered
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def forward(self) -> None:
                proxy._forward(self)

            do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = forward

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self._server.daemon_threads = True
        self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.url = f"https://{host}:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, name="interposing-proxy", daemon=True).start()

    def kubeconfig_through(self, kubeconfig: Path, path: Path) -> Path:
        """A copy of ``kubeconfig`` (JSON, as testbed.kube writes them) whose server is this proxy."""
        config = json.loads(kubeconfig.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = self.url
        path.write_text(json.dumps(config, indent=2) + "\n")
        path.chmod(0o600)
        return path

    def answered(self, method: str, path: str, status: int) -> int:
        with self._lock:
            return sum(1 for answer in self.answers if answer == (method, path, status))

    def _forward(self, request: BaseHTTPRequestHandler) -> None:
        body = request.rfile.read(int(request.headers.get("Content-Length") or 0))  # API clients never chunk a request
        path = urlsplit(request.path).path
        self.before(request.command, path)
        upstream = http.client.HTTPSConnection(*self._target, context=self._upstream_tls)
        try:
            headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
            upstream.request(request.command, request.path, body=body or None, headers=headers)
            response = upstream.getresponse()
            with self._lock:
                self.answers.append((request.command, path, response.status))
            request.send_response_only(response.status, response.reason)
            for k, v in response.getheaders():
                if k.lower() not in _HOP_BY_HOP:
                    request.send_header(k, v)
            request.send_header("Connection", "close")  # the body ends where the connection does
            request.end_headers()
            while chunk := response.read1(65536):
                request.wfile.write(chunk)
        except (OSError, http.client.HTTPException):
            pass  # a side went away: a watch the client dropped, the server or this proxy stopping
        finally:
            upstream.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
