"""`make dev`: the fraud filter on a laptop, with a real broker on loopback (`python -m devtools`).

Out of the wheel on purpose: it starts testbed's Kafka broker, whose jars hack/install-jars.sh
resolves from hack/maven/, and runs examples/fraud-local.yaml. Shipping it would mean shipping
those too, for a tool nobody runs from the image; in a checkout `make dev` runs it.
"""
