# The two commands of the README: `make demo` (the main job) and `make test` (every test).
# Both bring the stack up first (scripts/stack up is idempotent and returns in seconds
# when it already runs).

SHELL := /bin/bash
STACK := scripts/stack
CARGO ?= cargo

.PHONY: demo test test-container stack-up stack-down browser lint fmt

demo: stack-up
	eval "$$($(STACK) env)" && scripts/demo

test: stack-up browser
	eval "$$($(STACK) env)" && CARGO=$(CARGO) scripts/test-all

# The image, the compose file and the systemd unit, tried for real (podman, as root).
test-container: stack-up
	eval "$$($(STACK) env)" && scripts/container-test

stack-up:
	$(STACK) up

stack-down:
	$(STACK) down

# Headless Chromium and chromedriver for the console's browser test (installed if missing).
browser:
	scripts/browser

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

fmt:
	$(CARGO) fmt --all
