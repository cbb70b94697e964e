# The two set-up commands of the README. Both install what they need first (scripts/bootstrap.sh).
#   make run        run the daemon and the sample processor on an embedded Kinesis + DynamoDB (Ctrl-C stops)
#   make test       lint, type-check and run the whole test suite (what CI runs)
# and the loop to run while editing:
#   make test-fast  the pure and component tests only (tests/unit, tests/component): no emulator, no JVM,
#                   no Spark, no client toolchain; under a minute (docs/development.md)
SHELL := /bin/bash
export PATH := $(CURDIR)/.venv/bin:$(PATH)

.PHONY: run test test-fast bootstrap lint
bootstrap:
	@bash scripts/bootstrap.sh

# make run needs only the daemon, its local extra and the Python client: not the test suite's toolchains
run:
	@bash scripts/bootstrap.sh --run
	@cd samples/python && kcl-daemon run --local --properties app.properties

lint: bootstrap
	@bash scripts/lint.sh

# The suite waits on emulators, children and JVMs far more than it computes: four pytest-xdist workers
# on 2 cores run it in about a quarter of its summed time (892 s for 3,388 s on a quiet machine); each
# test file stays on one worker (its fixtures are shared), and the files go out longest first
# (tests/support/schedule.py, docs/development.md).
TEST_WORKERS ?= 4
test: bootstrap
	@bash scripts/lint.sh
	@bash scripts/test.sh -n $(TEST_WORKERS) --dist loadfile

# The editing loop: a worker per core, each test file on one worker and the long files first (as in
# make test), and Hypothesis's fast profile - a quarter of each property's examples; make test runs them
# all (tests/support/hypothesis_profiles.py, docs/development.md).
TEST_FAST_WORKERS ?= auto
test-fast: bootstrap
	@bash scripts/test.sh -q -n $(TEST_FAST_WORKERS) --dist loadfile --hypothesis-profile=kcl-daemon-fast \
		tests/unit tests/component
