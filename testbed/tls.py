"""A throwaway PKI for TLS tests, made with the ``openssl`` command (Python's ``cryptography`` is not a
dependency): a CA, a broker certificate for 127.0.0.1 and localhost, and a client certificate.

    pki = make_pki(tmp_path / "pki")
    KafkaBroker(tls=pki.broker_listener())   # an SSL listener that requires a client certificate
    pki.ca_cert, pki.client_cert, pki.client_key  # PEM files, the keys PKCS#8 unencrypted (what Kafka reads)

Keys are RSA 2048 (every Kafka and OpenSSL version reads them); certificates last two days.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from testbed.kafka_broker import TlsListener

DAYS = "2"


class PkiError(RuntimeError):
    """openssl is missing or refused a step."""


@dataclass(frozen=True)
class Pki:
    folder: Path
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def server_keystore(self) -> Path:
        """Key and certificate in one PEM file: what a broker's ``ssl.keystore.type=PEM`` reads."""
        path = self.folder / "server-keystore.pem"
        if not path.exists():
            path.write_text(self.server_key.read_text() + self.server_cert.read_text())
        return path

    def broker_listener(self, client_auth: str = "required") -> TlsListener:
        return TlsListener(keystore=self.server_keystore(), truststore=self.ca_cert, client_auth=client_auth)


def _openssl(*args: str, cwd: Path) -> None:
    binary = shutil.which("openssl")
    if binary is None:
        raise PkiError("the openssl command is missing (apt-get install openssl)")
    done = subprocess.run([binary, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise PkiError(f"openssl {' '.join(args[:2])} failed ({done.returncode}): {done.stderr.strip()}")


def _signed(folder: Path, name: str, subject: str, extensions: str) -> tuple[Path, Path]:
    """(certificate, key) of ``name``, signed by the folder's CA."""
    key, csr, cert, ext = (folder / f"{name}.{suffix}" for suffix in ("key", "csr", "crt", "ext"))
    ext.write_text(extensions)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key.name, "-out", csr.name, "-subj", subject, cwd=folder)
    _openssl("x509", "-req", "-in", csr.name, "-CA", "ca.crt", "-CAkey", "ca.key", "-set_serial",
             str(secrets.randbits(63)), "-days", DAYS, "-sha256", "-extfile", ext.name, "-out", cert.name,
             cwd=folder)  # fmt: skip
    return cert, key


def make_pki(folder: Path, client_name: str = "streamq-client") -> Pki:
    """A CA, a broker certificate (127.0.0.1, localhost) and a client certificate (CN=``client_name``)."""
    folder.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", DAYS,
             "-sha256", "-subj", "/CN=streamq-test-ca", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=folder)  # fmt: skip
    server = _signed(folder, "server", "/CN=localhost",
                     "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")  # fmt: skip
    client = _signed(folder, "client", f"/CN={client_name}", "extendedKeyUsage=clientAuth\n")
    return Pki(folder, folder / "ca.crt", folder / "ca.key", *server, *client)
