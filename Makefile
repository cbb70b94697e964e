# The two set-up commands of the README. Both install what they need first (scripts/bootstrap.sh).
#   make run    run the daemon and the sample processor on an embedded Kinesis + DynamoDB (Ctrl-C stops)
#   make test   lint, type-check and run the whole test suite (what CI runs)
SHELL := /bin/bash
export PATH := $(CURDIR)/.venv/bin:$(PATH)

.PHONY: run test bootstrap lint
bootstrap:
	@bash scripts/bootstrap.sh

run: bootstrap
	@cd samples/python && kcl-daemon run --local --properties app.properties

lint: bootstrap
	@bash scripts/lint.sh

test: bootstrap
	@bash scripts/lint.sh
	@bash scripts/test.sh
