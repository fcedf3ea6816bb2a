# The two commands of the README are `make run` and `make test`; the rest are their parts.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST := $(VENV)/bin/pytest
SPEC ?= examples/rate-to-console.yaml

.PHONY: run test setup jars kube image quickstart unit integration e2e crd bench bench-deps bench-latency bench-recovery bench-operator bench-chaos help

help:
	@echo "make run          run SPEC (default $(SPEC)) locally: no cluster, no broker"
	@echo "make dev          the fraud filter on a local broker: MODE=continuous|realTime|microBatch"
	@echo "make test         install everything and run every test tier"
	@echo "make unit         the fast tier (seconds)"
	@echo "make integration  real Spark, real Kafka, real kube-apiserver"
	@echo "make image        the streamq image (streamq:<version>) as an archive to load or push"
	@echo "make quickstart   on the current kubeconfig's cluster: operator, Kafka, the fraud filter, a feed"

setup:
	@hack/bootstrap.sh

run:
	@hack/run.sh $(SPEC)

# The next step after `make run`: a broker on loopback, a payment feed, the fraud filter.
MODE ?= continuous
dev:
	@hack/run.sh --dev --mode $(MODE)

jars: setup
	@hack/install-jars.sh

kube:
	@hack/install-kube.sh

# The image from a fresh clone: the jars it carries (Maven), then the build (Docker where one
# answers, else buildah). Tagged streamq:<pyproject version>, the chart's appVersion.
image: jars
	@hack/build-image.sh
	@archive="$$(hack/build-image.sh --print-archive)" && echo "image $$(hack/build-image.sh --print-ref): $$archive" && \
	  echo "  kind:      kind load image-archive $$archive" && \
	  echo "  a node:    ctr -n k8s.io images import $$archive" && \
	  echo "  registry:  skopeo copy docker-archive:$$archive docker://REGISTRY/streamq:TAG (README: Pushing the image)"

# README "On your cluster: the fraud filter in four commands": operator, Kafka, topics, checkpoint claim, the fraud-filter
# sample and a payments feed on the cluster of the current kubeconfig.
quickstart:
	@hack/quickstart.sh

unit: setup
	$(PYTEST) -m unit -q

integration: setup jars kube
	@hack/install-prometheus.sh
	@hack/install-seaweedfs.sh
	$(PYTEST) -m integration

e2e: setup jars kube
	@hack/install-node.sh
	$(PYTEST) -m e2e

# Everything: the tool installs are idempotent and cached under ~/.cache/streamq.
test:
	@hack/test.sh

crd: setup
	$(PY) -m controller.crd

# The benchmarks (not tests: they print figures and write bench/results/). A quiet machine
# matters: nothing else should run meanwhile. `make bench` takes about 50 minutes here.
bench-deps: setup jars kube
	@$(VENV)/bin/pip install -q -e '.[bench]'
	@hack/install-flink.sh

bench-latency: bench-deps
	$(PY) -m bench.latency --no-plots

bench-recovery: bench-deps
	for mode in continuous realTime microBatch; do $(PY) -m bench.recovery --mode $$mode --kills 5 --no-plots || exit 1; done

bench-operator: bench-deps
	$(PY) -m bench.operator

# Not part of `make bench`: a whole cluster (root for the local provider) and 30 minutes of faults.
# CHAOS_ARGS passes options, e.g. CHAOS_ARGS="--minutes 10 --seed 7 --standby".
bench-chaos: setup jars kube
	@$(VENV)/bin/pip install -q -e '.[bench]'
	@hack/install-node.sh
	$(PY) -m bench.chaos $(CHAOS_ARGS)

bench: bench-latency bench-recovery bench-operator
	$(PY) -m bench.plots
	$(PY) -m bench.report --write --latest

# kind: the README's "Try it on kind" (hack/kind-up.sh), its node image, and the e2e tier on kind.
.PHONY: kind-up kind-down kind-image e2e-kind
kind-up:
	@hack/kind-up.sh

kind-down:
	@hack/kind-up.sh down

kind-image:
	@hack/kind-docker.sh up >/dev/null && eval "$$(hack/kind-docker.sh env)" && hack/kind-image.sh

e2e-kind:
	@STREAMQ_E2E_PROVIDER=kind hack/test.sh -m e2e
