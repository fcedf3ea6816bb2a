"""Prometheus metrics of the operator, served on their own port."""

from __future__ import annotations

from collections import Counter as Tally

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from controller.phases import Phase


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        self.reconciles = Counter(
            "streamq_reconciles", "Reconcile passes, by what they decided.", ["verb"], registry=self.registry
        )
        self.errors = Counter("streamq_reconcile_errors", "Reconcile passes that failed.", registry=self.registry)
        self.restarts = Counter(
            "streamq_query_restarts", "Driver restarts after failures.", ["namespace", "query"], registry=self.registry
        )
        self.queries = Gauge("streamq_queries", "StreamingQueries by phase.", ["phase"], registry=self.registry)
        self._phases: dict[tuple[str, str], str] = {}
        for phase in Phase:
            self.queries.labels(phase=phase.value).set(0)

    def observe(self, namespace: str, query: str, verb: str, phase: Phase | None, restarted: bool) -> None:
        self.reconciles.labels(verb=verb).inc()
        if restarted:
            self.restarts.labels(namespace=namespace, query=query).inc()
        if phase is not None:
            self._phases[(namespace, query)] = phase.value
        self._refresh()

    def forget(self, namespace: str, query: str) -> None:
        self._phases.pop((namespace, query), None)
        try:
            self.restarts.remove(namespace, query)
        except KeyError:
            pass
        self._refresh()

    def _refresh(self) -> None:
        counts = Tally(self._phases.values())
        for phase in Phase:
            self.queries.labels(phase=phase.value).set(counts.get(phase.value, 0))

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:
        start_http_server(port, addr=addr, registry=self.registry)
