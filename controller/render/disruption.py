"""A standby query's PodDisruptionBudget (pure): minAvailable 1 over its driver pods, so a
drain never evicts the driver and its standby at once."""

from __future__ import annotations

from typing import Any

from controller import names
from controller.render.meta import child
from controller.run import Run


def disruption_budget(run: Run) -> dict[str, Any] | None:
    """One of the query's driver pods stays through a voluntary eviction (a drain, a node
    upgrade), so the standby is not evicted with the driver it stands by for. A driver pod that
    is not Ready (starting, Pending) may always be evicted: a standby that cannot start blocks no
    drain. Made once, like the Lease; removed when standby is turned off (``absent_children``)."""
    if not run.spec.runtime.standby:
        return None
    name = names.disruption_budget_name(run.query)
    return child(
        "policy/v1",
        "PodDisruptionBudget",
        name,
        run,
        names.COMPONENT_DISRUPTION,
        spec={
            "minAvailable": 1,
            "selector": {"matchLabels": names.labels(run.query, names.COMPONENT_DRIVER)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    )
