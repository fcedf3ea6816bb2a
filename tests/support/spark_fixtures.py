"""One SparkSession per test run: the JVM takes 10-20 s to start here."""

from __future__ import annotations

import pytest

from app.pipeline.session import connector_jars


@pytest.fixture(scope="session")
def spark():
    from pyspark.sql import SparkSession

    jars = connector_jars()
    builder = (
        SparkSession.builder.appName("streamq-tests")
        .master("local[6]")  # continuous queries hold a slot per partition: leave room
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
