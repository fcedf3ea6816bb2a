"""Pack a few static files as a docker-archive image (what `docker save` writes).

    python -m testbed.cluster.images.pack OUT.tar NAME:TAG --entrypoint /pause \
        --file /pause=/path/to/pause[:0755] [--user 65535:65535] [--expose 53/udp]

One layer holding the given files, owned by root, with a fixed mtime: the same
inputs give the same bytes, so an unchanged image imports as the same digest.
`ctr -n k8s.io images import` and `kind load image-archive` read this format;
ctr names the image after its RepoTags entry, normalized
(`streamq-e2e/pause:1.0` -> `docker.io/streamq-e2e/pause:1.0`).

Used by hack/install-node.sh for the pause image (a static C program) and
CoreDNS (a static Go binary): neither needs a base image.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Annotated

import typer

from contract.cli_help import HelpCommand
from contract.commands import invoke

EPOCH = 0


def _dirs_of(path: str) -> list[str]:
    parts = path.strip("/").split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def layer_tar(files: list[tuple[str, Path, int]]) -> bytes:
    """A tar of (path in image, source file, mode), with parent directories."""
    buf = io.BytesIO()
    seen: set[str] = set()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dest, _, _ in sorted(files):
            for d in _dirs_of(dest):
                if d in seen:
                    continue
                seen.add(d)
                info = tarfile.TarInfo(d)
                info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, EPOCH
                tar.addfile(info)
        for dest, src, mode in sorted(files):
            data = src.read_bytes()
            info = tarfile.TarInfo(dest.lstrip("/"))
            info.size, info.mode, info.mtime = len(data), mode, EPOCH
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def docker_archive(
    out: Path,
    ref: str,
    files: list[tuple[str, Path, int]],
    entrypoint: list[str],
    cmd: list[str] | None = None,
    user: str | None = None,
    exposed: list[str] = (),
) -> str:
    """Writes the archive; returns the image id (sha256 of its config)."""
    layer = layer_tar(files)
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config: dict = {"Entrypoint": entrypoint, "Env": ["PATH=/"], "WorkingDir": "/"}
    if cmd:
        config["Cmd"] = cmd
    if user:
        config["User"] = user
    if exposed:
        config["ExposedPorts"] = {p: {} for p in exposed}
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "testbed/cluster/images/pack.py"}],
    }
    config_bytes = json.dumps(image_config, sort_keys=True, separators=(",", ":")).encode()
    config_id = hashlib.sha256(config_bytes).hexdigest()
    layer_dir = diff_id.split(":")[1]
    manifest = [{"Config": f"{config_id}.json", "RepoTags": [ref], "Layers": [f"{layer_dir}/layer.tar"]}]
    name, _, tag = ref.rpartition(":")
    members = [
        (f"{config_id}.json", config_bytes),
        (f"{layer_dir}/layer.tar", layer),
        ("manifest.json", json.dumps(manifest).encode()),
        ("repositories", json.dumps({name: {tag: layer_dir}}).encode()),
    ]
    tmp = out.with_name(out.name + ".new")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo(layer_dir)
        info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, EPOCH
        tar.addfile(info)
        for member, data in members:
            info = tarfile.TarInfo(member)
            info.size, info.mode, info.mtime = len(data), 0o644, EPOCH
            tar.addfile(info, io.BytesIO(data))
    tmp.replace(out)
    return "sha256:" + config_id


cli = typer.Typer(add_completion=False, context_settings={"help_option_names": ["-h", "--help"]})


@cli.command(help=__doc__.split("\n\n")[0], cls=HelpCommand)
def pack(
    ctx: typer.Context,
    out: Annotated[Path, typer.Argument(metavar="OUT")],
    ref: Annotated[str, typer.Argument(metavar="REF", help="name:tag")],
    entrypoint: Annotated[list[str], typer.Option(metavar="ENTRYPOINT", help="repeat for each word")],
    file: Annotated[list[str], typer.Option(metavar="FILE", help="DEST=SRC[:MODE] (octal mode, default 0755)")],
    cmd: Annotated[list[str] | None, typer.Option(metavar="CMD")] = None,
    user: Annotated[str | None, typer.Option(metavar="USER")] = None,
    expose: Annotated[list[str] | None, typer.Option(metavar="EXPOSE")] = None,
) -> None:
    files = []
    for spec in file:
        dest, _, src = spec.partition("=")
        src, _, mode = src.partition(":")
        files.append((dest, Path(src), int(mode or "0755", 8)))
    image_id = docker_archive(out, ref, files, entrypoint, cmd or None, user, expose or [])
    print(image_id)
    ctx.obj.result = 0


def main(argv: list[str] | None = None) -> int:
    return int(invoke(cli, argv, "python -m testbed.cluster.images.pack"))


if __name__ == "__main__":
    raise SystemExit(main())
