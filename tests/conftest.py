# Fixture modules shared by all test tiers. Keep this a plain list; append entries.
pytest_plugins = [
    "tests.support.spark_fixtures",
    "tests.support.kube_fixtures",
    "tests.support.kafka_fixtures",
    "tests.support.seaweedfs_fixtures",
]
