"""What both tools sync in the gitops tier: two queries on the in-cluster broker, and the checks on
what the operator does with them (the tools' own status is read by each test).

``fraud``  the fraud filter, its checkpoint on a node directory (so a spec change is a warm upgrade)
``audit``  the same filter into another topic, an emptyDir checkpoint (it only has to keep running)"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import yaml

from testbed.cluster.addons import E2E_NAMESPACE, OPERATOR_NAMESPACE
from testbed.cluster.workload import Kafka, Queries, fraud_spec, payments, wait_output
from testbed.specs import FLAG_ABOVE, FRAUD_TRANSFORMS, resource
from testbed.wait import wait_for

NEW_THRESHOLD = 22  # payments() amounts are 1500 or 20..26: 23..26 are flagged after the change only
FRAUD, AUDIT = "fraud", "audit"
BROKEN_FILTER = "amount >"  # admitted by the API server, refused by the operator (not one Spark SQL expression)
BROKEN_MESSAGE = "is not readable as one Spark SQL expression"


def flagged_by(records: list[tuple[str, str]], above: int) -> list[tuple[str, str]]:
    return [(k, v) for k, v in records if json.loads(v)["amount"] > above]


def transforms(where: str) -> list[dict[str, Any]]:
    return [FRAUD_TRANSFORMS[0], {"where": where}, FRAUD_TRANSFORMS[2]]


@dataclass
class Fleet:
    """The queries as Git holds them (``queries``: name -> StreamingQuery) and their topics."""

    tool: str
    kafka: Kafka
    sq: Queries
    source: str = ""
    sink: str = ""
    queries: dict[str, dict[str, Any]] = field(default_factory=dict)
    produced: list[tuple[str, str]] = field(default_factory=list)
    expected: list[tuple[str, str]] = field(default_factory=list)  # what fraud's sink must hold by now
    above: int = FLAG_ABOVE  # fraud's threshold for the next payments

    @classmethod
    def create(cls, tool: str, cluster: Any, kafka: Kafka) -> Fleet:
        fleet = cls(tool, kafka, Queries(cluster, f"gitops ({tool})", E2E_NAMESPACE))
        fleet.source = kafka.create_topic(f"{tool}-payments", partitions=2)
        fleet.sink = kafka.create_topic(f"{tool}-flagged", partitions=1)
        audit_sink = kafka.create_topic(f"{tool}-audit", partitions=1)
        small = {"runtime.driver.coreRequest": "250m"}  # two queries and a warm standby beside Kafka on 2 cores
        specs = {FRAUD: fraud_spec(fleet.source, fleet.sink, cluster.node_dir(f"{tool}-{FRAUD}"), **small),
                 AUDIT: fraud_spec(fleet.source, audit_sink, None, **small)}  # fmt: skip
        fleet.queries = {name: resource(spec, name, E2E_NAMESPACE) for name, spec in specs.items()}
        return fleet

    def files(self, kustomization: bool = True, folder: str = "queries") -> dict[str, str | None]:
        """The queries' folder as Git holds it; ``kustomization``: with a kustomization.yaml listing them
        (Flux's Kustomization builds one when there is none, Argo CD would run kustomize for one)."""
        files: dict[str, str | None] = {f"{folder}/{name}.yaml": yaml.safe_dump(doc) for name, doc in self.queries.items()}
        if kustomization:
            files[f"{folder}/kustomization.yaml"] = yaml.safe_dump({"resources": [f"{n}.yaml" for n in sorted(self.queries)]})
        return files

    def set_filter(self, where: str) -> None:
        self.queries[FRAUD]["spec"]["transforms"] = transforms(where)

    def produce_and_wait(self, n: int, timeout: float = 240) -> None:
        """``n`` more payments in; every payment so far flagged out of fraud's sink by the filter it
        ran with (the threshold it has now for these, the earlier one for the earlier ones)."""
        batch = payments(n, start=len(self.produced))
        self.kafka.produce(self.source, batch)
        self.expected += flagged_by(batch, self.above)
        self.produced += batch
        out = wait_output(self.kafka, self.sink, self.expected, timeout, lambda: self.sq.describe(FRAUD))
        assert not out.unexpected, f"records that are not flagged payments: {sorted(out.unexpected)[:5]}"

    def assert_created_after_the_operator(self, cluster: Any) -> None:
        """The documented order: no query exists before the operator's Deployment was Available."""
        deployment = json.loads(cluster.kubectl("get", "deployment", "-n", OPERATOR_NAMESPACE, "-o", "json").stdout)["items"]
        available = [c["lastTransitionTime"] for d in deployment for c in d["status"].get("conditions", [])
                     if c["type"] == "Available" and c["status"] == "True"]  # fmt: skip
        assert available, f"the operator's Deployment is not Available: {deployment}"
        for name in self.queries:
            created = self.sq.get(name)["metadata"]["creationTimestamp"]
            assert created >= available[0], f"{name} created {created}, before the operator was Available ({available[0]})"

    def wait_gone(self, name: str, timeout: float = 300) -> None:
        """The query deleted through the operator's finalizer: the query, its pods and its Lease are gone."""
        sq = self.sq

        def gone() -> bool:
            left = sq.kubectl("get", "sq", name, check=False).returncode == 0
            pods = sq.kubectl("get", "pods", "-l", f"streamq.io/query={name}", "-o", "name").stdout.strip()
            lease = sq.kubectl("get", "lease", f"{name}-driver", check=False).returncode == 0
            return not (left or pods or lease)

        wait_for(gone, timeout, lambda: f"{name}, its pods and its Lease deleted:\n{sq.describe(name)}", ignore=(Exception,))


def elapsed(since: float) -> float:
    return time.monotonic() - since
