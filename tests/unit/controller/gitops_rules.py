"""How GitOps tools judge a StreamingQuery, computed here the way each tool does it.

* ``argo_health``: docs/argocd-health.lua, the script docs/gitops.md tells Argo CD to
  use, run in Lua 5.1 (Argo CD runs health scripts with gopher-lua, a Lua 5.1) with the
  object as the global ``obj``.
* ``kstatus``: the rules of kstatus (sigs.k8s.io/cli-utils/pkg/kstatus, what Flux's
  ``wait``, kpt and cli-utils compute health from), as its documentation states them
  for a custom resource: a deletionTimestamp is Terminating; a status.observedGeneration
  that differs from metadata.generation is InProgress; then the conditions in their
  order: ``Reconciling`` True is InProgress, ``Stalled`` True is Failed; anything else
  is Current (kstatus never reads Ready).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contract import GROUP, KIND, VERSION
from controller.status import QueryStatus

ARGO_SCRIPT = Path(__file__).resolve().parents[3] / "docs" / "argocd-health.lua"


def query_object(status: QueryStatus | dict[str, Any], generation: int, name: str = "q") -> dict[str, Any]:
    """The StreamingQuery as a tool reads it from the API: metadata and the status as written."""
    dumped = status.dump() if isinstance(status, QueryStatus) else status
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
            "metadata": {"name": name, "namespace": "ns", "generation": generation}, "status": dumped}  # fmt: skip


def argo_health(obj: dict[str, Any], script: str | None = None) -> tuple[str, str]:
    """(status, message) the Argo CD health script returns for ``obj``."""
    from lupa import lua51

    lua = lua51.LuaRuntime(unpack_returned_tuples=True)
    lua.globals().obj = lua.table_from(obj, recursive=True)
    result = lua.execute(script if script is not None else ARGO_SCRIPT.read_text())
    return result["status"], result["message"]


def kstatus(obj: dict[str, Any]) -> str:
    """Current, InProgress, Failed or Terminating, by kstatus's generic rules."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    if meta.get("deletionTimestamp"):
        return "Terminating"
    generation, observed = meta.get("generation"), status.get("observedGeneration")
    if generation is not None and observed is not None and observed != generation:
        return "InProgress"
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Reconciling" and condition.get("status") == "True":
            return "InProgress"
        if condition.get("type") == "Stalled" and condition.get("status") == "True":
            return "Failed"
    return "Current"
