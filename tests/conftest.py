# Fixture modules shared by all test tiers. Keep this a plain list; append entries.
pytest_plugins = [
    "tests.support.kafka_fixtures",
]
