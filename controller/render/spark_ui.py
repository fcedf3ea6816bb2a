"""The Service in front of the current driver's Spark UI, and an Ingress to it (pure).

Which attempt is current, and when the Service follows it, is decided in
``controller.decide.spark_ui``; here is only what the objects look like.
"""

from __future__ import annotations

from typing import Any

from contract import SPARK_UI_PORT
from controller import names
from controller.config import Settings


def selector(query: str, attempt: int) -> dict[str, str]:
    """The drivers of one attempt: a standby (a later attempt) is never selected."""
    return names.labels(query, names.COMPONENT_DRIVER, attempt)


def _metadata(query: str, namespace: str) -> dict[str, Any]:
    return {
        "name": names.spark_ui_service_name(query),
        "namespace": namespace,
        "labels": names.labels(query, names.COMPONENT_SPARK_UI),
    }


def spark_ui_service(query: str, namespace: str, attempt: int) -> dict[str, Any]:
    """The query's Spark UI and Spark's own metrics (/metrics/prometheus) on the driver of
    ``attempt`` only: a standby driver (a later attempt) is not behind it."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(query, namespace),
        "spec": {
            "type": "ClusterIP",
            "selector": selector(query, attempt),
            "ports": [{"name": names.PORT_SPARK_UI, "port": SPARK_UI_PORT, "targetPort": SPARK_UI_PORT}],
        },
    }


def spark_ui_ingress(query: str, namespace: str, settings: Settings) -> dict[str, Any] | None:
    """An Ingress to the query's UI Service when the installation asks for one (chart value
    sparkUI.ingress.host, a template of {query} and {namespace}); None otherwise."""
    if not settings.spark_ui_ingress_host:
        return None
    host = settings.spark_ui_ingress_host.format(query=names.query_label(query), namespace=namespace)
    spec: dict[str, Any] = {"rules": [{"host": host, "http": {"paths": [{
        "path": "/", "pathType": "Prefix",
        "backend": {"service": {"name": names.spark_ui_service_name(query), "port": {"number": SPARK_UI_PORT}}},
    }]}}]}  # fmt: skip
    if settings.spark_ui_ingress_class:
        spec["ingressClassName"] = settings.spark_ui_ingress_class
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": _metadata(query, namespace), "spec": spec}
