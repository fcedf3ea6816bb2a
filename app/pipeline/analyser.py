"""The exact layer of validation: ask Spark's own analyser.

The query is planned and started against a throwaway checkpoint, given a few
seconds to die on its own (some refusals, such as real-time mode with a rate
source, come from the query's thread, not from ``start()``), then stopped. No
broker is needed: Spark analyses before it connects, and the sink never gets a row
because the query is stopped before its first epoch can commit.
"""

from __future__ import annotations

import tempfile

from app.pipeline.exactly_once import at_least_once
from app.pipeline.failures import classify, one_line
from app.pipeline.plan import apply_transform, build_writer, read_source
from contract import ExitCode
from contract.load import QueryDocument
from contract.problems import Problem

GRACE_SECONDS = 4.0
# Without these, stopping a query whose broker is unreachable waits a full
# minute for Kafka's default API timeout.
FAST_FAIL_KAFKA = {"kafka.default.api.timeout.ms": "2000", "kafka.request.timeout.ms": "2000"}


def _fail_fast(spec):
    kafka = spec.source.kafka
    if kafka is None:
        return spec
    fast = kafka.model_copy(update={"options": {**FAST_FAIL_KAFKA, **kafka.options}})
    return spec.model_copy(update={"source": spec.source.model_copy(update={"kafka": fast})})


def _refused(path: str, exc: BaseException) -> list[Problem]:
    return [Problem(path, f"Spark refuses the query: {one_line(str(exc))}")]


def analyse(spark, doc: QueryDocument, grace_s: float = GRACE_SECONDS) -> list[Problem]:
    """Problems Spark finds in the query; empty when Spark accepts it.

    Spark analyses each transform as it is applied, so the DataFrame is built step by
    step: a refusal there names the transform (spec.transforms[i]) it comes from."""
    spec = _fail_fast(at_least_once(doc.spec))  # never a transactional writer: it would fence the running query's
    with tempfile.TemporaryDirectory(prefix="streamq-validate-") as scratch:
        # Whatever building the query raises (Spark's analyser, py4j, the plan's own checks) is
        # Spark's answer about this spec, so each step below catches everything and reports it.
        try:
            df = read_source(spark, spec)
        except Exception as exc:  # noqa: BLE001 - see above
            return _refused("spec.source", exc)
        for index, step in enumerate(spec.transforms):
            try:
                df = apply_transform(df, step)
            except Exception as exc:  # noqa: BLE001 - see above
                return _refused(f"spec.transforms[{index}]", exc)
        try:
            query = build_writer(df, f"validate-{doc.name}", spec, checkpoint_location=scratch).start()
        except Exception as exc:  # noqa: BLE001 - the mode's own limits (aggregation in continuous mode, ...)
            return _refused("spec", exc)

        try:
            query.awaitTermination(grace_s)
            error = query.exception()
        except Exception as exc:  # noqa: BLE001 - awaitTermination raises what killed the query, in whichever type Spark chose
            error = exc
        finally:
            query.stop()
    if error is not None and classify(error) is ExitCode.QUERY_REFUSED:
        return [Problem("spec", f"Spark refuses the query: {one_line(str(error))}")]
    return []
