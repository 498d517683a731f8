# Two commands do everything on a fresh machine:
#   make demo   - set up, ingest the bundled sample data, serve the demo (offline, no API key)
#   make test   - set up, lint, type-check, run every test (Python, JavaScript, browser)
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUNTIME := $(VENV)/.runtime
SHARED ?= $(or $(GCITE_SHARED_DIR),../shared)
VECTORS := $(SHARED)/vectors/citation-stream.v2.json
STREAM_VECTORS := tests/vectors/dify-stream.v1.json
PORT ?= 8000
MP_TEST := clients/miniprogram/test
MP_STAMP := $(MP_TEST)/node_modules/.installed

SDK := .venv-sdk
SDK_PY := $(SDK)/dify-client-python/.installed $(SDK)/dify-client/.installed $(SDK)/dify-knowledge/.installed
SDK_JS := tests/sdk/js/node_modules/.installed

.PHONY: demo test test-miniprogram setup browser services nginx sdk lint miniprogram bench clean

# What the demo needs (the runtime dependencies) ...
$(RUNTIME): pyproject.toml requirements.lock
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip==25.3 2>&1 | { grep -v 'is ignored: it is neither' || true; }
	$(BIN)/pip install --quiet -c requirements.lock -e . 2>&1 | { grep -v 'is ignored: it is neither' || true; }
	# byte-compiled now: a service whose folder it may not write (the systemd unit) would
	# otherwise compile every module again at each start (an editable install has no .pyc)
	$(BIN)/python -m compileall -q src
	touch $(RUNTIME)

# ... and the test tools on top (make test, make setup).
$(STAMP): $(RUNTIME)
	$(BIN)/pip install --quiet -c requirements.lock -e '.[dev]' 2>&1 | { grep -v 'is ignored: it is neither' || true; }
	touch $(STAMP)

setup: $(STAMP)

# Third-party Dify clients for the conformance tests (tests/sdk/), installed at pinned
# versions here and used offline by the tests: each PyPI SDK in its own venv (both
# ship the module `dify_client`), the npm ones from tests/sdk/js/package-lock.json.
$(SDK)/%/.installed: tests/sdk/python/%.lock
	rm -rf $(SDK)/$*
	$(PY) -m venv $(SDK)/$*
	$(SDK)/$*/bin/pip install --quiet --no-deps -r $< 2>&1 | { grep -v 'is ignored: it is neither' || true; }
	touch $@

$(SDK_JS): tests/sdk/js/package.json tests/sdk/js/package-lock.json
	cd tests/sdk/js && npm ci --no-audit --no-fund --loglevel=error
	touch $@

sdk: $(SDK_PY) $(SDK_JS)

# The browser tests' test-only npm packages (axe-core; streamdown, React and esbuild), pinned by
# tests/browser/package-lock.json.
BROWSER_NPM := tests/browser/node_modules/.installed
$(BROWSER_NPM): tests/browser/package.json tests/browser/package-lock.json
	cd tests/browser && npm ci --no-audit --no-fund --loglevel=error
	touch $@

browser: $(BROWSER_NPM)
	@if ! command -v chromium >/dev/null 2>&1 || ! fc-list 2>/dev/null | grep -qi wqy; then \
	  echo "installing Debian chromium and a CJK font for the browser tests"; \
	  SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null; \
	fi

services:
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  echo "installing Debian postgresql for the conversation-store tests"; \
	  SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	fi

# Debian's nginx for the two-machine test (tests/knowledge/test_two_machines.py), which
# runs it unprivileged from a config it renders into a temp dir. Where apt-get cannot
# install it, the package is downloaded and unpacked into $(VENV)/nginx instead; where
# neither works the test skips with the reason, so this target only warns.
NGINX_LOCAL := $(VENV)/nginx/usr/sbin/nginx
nginx:
	@if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ] && [ ! -x $(NGINX_LOCAL) ]; then \
	  echo "installing Debian nginx for the load-balancer test"; \
	  SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  { $$SUDO apt-get update -qq && \
	    $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null; } || \
	  { rm -rf $(VENV)/nginx && mkdir -p $(VENV)/nginx && \
	    (cd $(VENV)/nginx && apt-get download nginx >/dev/null) && \
	    dpkg-deb -x $(VENV)/nginx/nginx_*.deb $(VENV)/nginx; } || \
	  echo "warning: nginx could not be installed: the load-balancer test will skip"; \
	fi

# The WeChat mini program: copy the JavaScript client into the example as CommonJS
# (no npm needed), and install its pinned test packages (npm ci, once per lock change).
miniprogram:
	node clients/miniprogram/scripts/build-client.mjs

$(MP_STAMP): $(MP_TEST)/package.json $(MP_TEST)/package-lock.json
	cd $(MP_TEST) && npm ci --no-audit --no-fund --loglevel=error
	touch $(MP_STAMP)

# Just the mini program: the copy step, its pinned test packages, and the simulator tests
# against the real service on loopback (renderings in test-artifacts/miniprogram/).
test-miniprogram: setup miniprogram $(MP_STAMP)
	node --test clients/miniprogram/test/*.test.js

demo: $(RUNTIME)
	@echo "在另一个终端使用 gcite 命令：先运行 source $(VENV)/bin/activate（或直接用 $(BIN)/gcite）"
	$(BIN)/gcite demo --port $(PORT)

lint: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

test: setup browser services nginx sdk lint miniprogram $(MP_STAMP)
	@if [ -f $(VECTORS) ]; then \
	  echo "conformance: $(VECTORS)"; \
	  $(BIN)/gcite vectors $(VECTORS) && node clients/js/bin/vectors.mjs $(VECTORS); \
	else echo "skipped: no citation vectors at $(VECTORS) (set SHARED=...)"; fi
	@echo "stream contract: $(STREAM_VECTORS)"
	$(BIN)/gcite vectors $(STREAM_VECTORS) && node clients/js/bin/vectors.mjs $(STREAM_VECTORS)
	node --test clients/js/test/
	node --test clients/miniprogram/test/*.test.js
	GCITE_SHARED_DIR=$(abspath $(SHARED)) $(BIN)/pytest -q

bench: setup
	for f in benchmarks/bench_*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) $(SDK) tests/sdk/js/node_modules .pytest_cache .mypy_cache .ruff_cache
