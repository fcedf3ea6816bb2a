"""Playing the kubelet's log endpoint for the operator's integration tests.

There is no kubelet next to the test's kube-apiserver, and the operator reads a
driver's progress from its log (``GET pods/<name>/log`` through the API server,
which asks the node's kubelet). This serves the real log of a job the test runs
as a local process at the kubelet's path, ``/containerLogs/<ns>/<pod>/<container>``,
on a Node object whose address and kubelet port point here; the test binds the
driver pod to that node, as the scheduler would. Everything between the job's
log file and the operator - the API server's log proxy, RBAC, the operator's
parsing - is the real thing. The API server has no kubelet CA configured, so it
does not verify this endpoint's self-signed certificate, as for any such kubelet.
"""

from __future__ import annotations

import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from kubernetes import client


class KubeletLogs:
    def __init__(self, workdir: Path, host: str = "127.0.0.1"):
        self.host = host
        self.logs: dict[tuple[str, str, str], Path] = {}
        cert, key = workdir / "kubelet.crt", workdir / "kubelet.key"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=kubelet",
                        "-addext", f"subjectAltName=IP:{host}", "-keyout", str(key), "-out", str(cert)],
                       check=True, capture_output=True)  # fmt: skip
        logs = self.logs

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                url = urlparse(self.path)
                parts = url.path.strip("/").split("/")
                path = logs.get(tuple(parts[1:4])) if len(parts) == 4 and parts[0] == "containerLogs" else None
                if path is None:
                    self.send_error(404, "no such container")
                    return
                text = path.read_text(errors="replace") if path.exists() else ""
                tail = parse_qs(url.query).get("tailLines")
                lines = text.splitlines(keepends=True)
                body = "".join(lines[-int(tail[0]) :] if tail else lines).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def register_node(self, core: client.CoreV1Api, name: str) -> None:
        core.create_node({"metadata": {"name": name}})
        core.patch_node_status(name, {"status": {
            "addresses": [{"type": "InternalIP", "address": self.host}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "test"}],
        }})  # fmt: skip

    def bind(self, core: client.CoreV1Api, namespace: str, pod: str, node: str) -> None:
        """What the scheduler does: the pod is on our node."""
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod}, "target": {"kind": "Node", "name": node}}
        core.create_namespaced_pod_binding(pod, namespace, body, _preload_content=False)

    def serve(self, namespace: str, pod: str, container: str, log: Path) -> None:
        self.logs[(namespace, pod, container)] = log

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
