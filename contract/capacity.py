"""What one query can hold of the cluster at once (pure): what policy.maxExecutors, maxCores and
maxMemory compare.

A query runs one driver pod with its executors, and for some queries a second driver beside it:

    runtime.standby        always: the standby waits beside the running driver
                           (controller.decide.standby)
    warm upgrades          at every spec change, for as long as the new driver warms up (up to
    (QuerySpec.warm_upgrades,  upgrade.readyWithin): it waits beside the running one
    the pod backend's      (controller.decide.upgrade); blueGreen's green driver is one
    default)

A driver waiting on the Lease starts no executors (app.driver.executors): in steady state a
standby query runs one set. It asks for them the moment it takes over, while the set of the
driver it replaces is still going (Spark deletes it as that driver stops, Kubernetes with that
driver's pod), and a ResourceQuota counts a pod until it is gone: for those seconds both sets
hold what they requested. So every driver that can run at once counts with its executors:
``drivers x (driver + executors)``, and a quota sized from the caps lets a takeover through.
A query with executors has warm upgrades only with a standby (QuerySpec.warm_upgrades): without one,
a warm upgrade is two drivers' worth and no executors more.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from kubernetes.utils import parse_quantity

from contract.spec import QuerySpec, UpgradeStrategy

# Spark on Kubernetes adds this much to an executor pod's memory (spark.kubernetes.memoryOverheadFactor 0.1,
# at least 384 MiB); the driver pod is limited to driver.memory itself (controller.render.units.driver_heap).
EXECUTOR_OVERHEAD_FACTOR = Decimal("0.1")
EXECUTOR_MIN_OVERHEAD = Decimal(384 * 2**20)


def second_driver(spec: QuerySpec) -> str | None:
    """Why a second driver of the query can run beside the first, None when none can."""
    if spec.runtime.standby:
        return "runtime.standby"
    if spec.warm_upgrades:
        return "upgrade.strategy blueGreen" if spec.upgrade_policy.strategy is UpgradeStrategy.BLUE_GREEN else "warm upgrades"
    return None


def concurrent_drivers(spec: QuerySpec) -> int:
    """Driver pods of the query that can run at once, each with its executors (see above)."""
    return 1 if second_driver(spec) is None else 2


def pod_cores(cores: int, request: str | None) -> Decimal:
    """What a pod takes from the cluster: Spark's cores or the CPU it requests, the larger."""
    requested: Decimal = parse_quantity(request) if request else Decimal(0)
    return max(Decimal(cores), requested)


def executor_memory(spec: QuerySpec) -> Decimal:
    """One executor pod's memory: executors.memory and Spark's overhead."""
    memory: Decimal = parse_quantity(spec.runtime.executors.memory)
    return memory + max(memory * EXECUTOR_OVERHEAD_FACTOR, EXECUTOR_MIN_OVERHEAD)


@dataclass(frozen=True)
class AtOnce:
    """One driver's worth (``driver``, ``executors``) times the drivers that can run at once."""

    drivers: int
    why: str | None  # second_driver's reason
    driver: Decimal
    executors: int
    executor: Decimal

    @property
    def total(self) -> Decimal:
        return self.drivers * (self.driver + self.executors * self.executor)

    def explain(self, one: str, total: str) -> str:
        """``one``: a driver's worth as written out; ``total``: the total with its unit."""
        if self.drivers == 1:
            return f"{one} = {total}"
        return f"{self.drivers} drivers at once ({self.why}): {self.drivers} x ({one}) = {total}"


def _at_once(spec: QuerySpec, driver: Decimal, executor: Decimal) -> AtOnce:
    return AtOnce(concurrent_drivers(spec), second_driver(spec), driver, spec.runtime.executors.instances, executor)


def executors_at_once(spec: QuerySpec) -> AtOnce:
    return _at_once(spec, Decimal(0), Decimal(1))


def cores_at_once(spec: QuerySpec) -> AtOnce:
    rt = spec.runtime
    return _at_once(
        spec, pod_cores(rt.driver.cores, rt.driver.core_request), pod_cores(rt.executors.cores, rt.executors.core_request)
    )


def memory_at_once(spec: QuerySpec) -> AtOnce:
    return _at_once(spec, parse_quantity(spec.runtime.driver.memory), executor_memory(spec))
