"""A running streaming query whose executors app.driver.resize follows, on a real Spark cluster in one
process tree (Spark's local-cluster master: a master, two workers, an executor JVM each). Run by
tests/integration/test_resize_in_place.py in its own process (a JVM holds one SparkContext):

    python -m testbed.resize_probe WORKDIR

It writes the executors file as the kubelet would, step by step, and prints one JSON line per step: the
executors registered, whether the query still runs, and the batches it committed meanwhile.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from pathlib import Path

from app.driver.executors import registered
from app.driver.resize import Resizer

STEP_WITHIN_S = 90.0


def main(workdir: Path) -> int:
    from pyspark.sql import SparkSession

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    spark = (SparkSession.builder.master("local-cluster[2,1,1024]").appName("resize-probe")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())  # fmt: skip
    _until(lambda: registered(spark) == 2, "two executors at the start")
    stream = spark.readStream.format("rate").option("rowsPerSecond", 200).option("numPartitions", 4).load()
    query = (stream.writeStream.format("noop").trigger(processingTime="1 second")
             .option("checkpointLocation", str(workdir / "ck")).start())  # fmt: skip
    path = workdir / "executors"
    path.write_text("2")
    stop = threading.Event()
    Resizer(spark, str(path), most=2, stop=stop, every_s=0.5).start(2)
    for wanted, expect in (("1", 1), ("3", 1), ("2", 2)):  # 3: beyond the most it follows
        batch = _batch(query)
        path.write_text(wanted + "\n")
        reached = _until(lambda e=expect, b=batch: registered(spark) == e and _batch(query) >= b + 3, f"{expect} executors")
        print(json.dumps({"wrote": wanted, "registered": registered(spark), "reached": reached,
                          "active": query.isActive, "batches": _batch(query) - batch,
                          "exception": str(query.exception()) if query.exception() else None}), flush=True)  # fmt: skip
    stop.set()
    query.stop()
    spark.stop()
    return 0


def _batch(query) -> int:
    progress = query.lastProgress
    return int(progress["batchId"]) if progress else -1


def _until(condition, what: str) -> bool:
    deadline = time.monotonic() + STEP_WITHIN_S
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.25)  # the poll interval of this wait
    print(f"not reached within {STEP_WITHIN_S:g}s: {what}", file=sys.stderr)
    return False


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
