# The only place that sets up a machine for this project.
# `make test` and `make demo` create the virtual environment when it is missing
# (or when pyproject.toml changed) and then run; `make test` also installs Debian's chromium and
# chromium-driver for the browser tests when they are missing, and builds and tests the JVM client
# (clients-java: Maven) and the TypeScript client (clients-ts: npm ci, tsc, node --test).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
BENCH  := $(VENV)/.installed-bench
# the deployment images' pins, used as constraints here so the tests run the versions that ship
PINS   := deploy/dataflow/requirements.txt

.PHONY: env jvm clients-java clients-ts cluster-up cluster-down test demo bench clean

env: $(STAMP)

# setuptools tells every editable install, as a warning, to beware of folders named like the package (10
# lines before `make demo`'s first): not a fault, so hidden unless V=1. A real warning of the build (a
# package setuptools would ignore) is caught by tests/test_packaging.py, whose wheel build hides nothing.
QUIET_BUILD := $(if $(V),,PYTHONWARNINGS=ignore::UserWarning)

$(STAMP): pyproject.toml $(PINS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(QUIET_BUILD) $(PY) -m pip install --quiet -c $(PINS) -e ".[test,collect,pandas]"
	touch $(STAMP)

# The dashboard test drives Debian's Chromium through chromedriver (no browser downloads here).
CHROMEDRIVER := /usr/bin/chromedriver
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

$(CHROMEDRIVER):
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium chromium-driver

# The JVM parts of the local cluster (Flink job server, Kafka IO, a Kafka broker), resolved by Maven
# from deploy/flink/jvm/*/pom.xml into .jvm/ (ignored; no jar is committed).
JVM      := .jvm
JVM_JOBS := $(JVM)/job-server/.resolved
JVM_KAFKA := $(JVM)/kafka/.resolved

$(JVM)/%/.resolved: deploy/flink/jvm/%/pom.xml
	rm -rf $(JVM)/$*/lib
	mvn --batch-mode --quiet -f $< dependency:copy-dependencies -DincludeScope=runtime \
	  -DoutputDirectory=$(abspath $(JVM))/$*/lib
	touch $@

jvm: $(JVM_JOBS) $(JVM_KAFKA)

# The JVM client (clients/java, docs/clients.md): Maven builds it at Java 11, checks it against Android's
# API level 21 and runs its JUnit tests (the shared test vectors, the chi-square tests, Apache Avro's
# encoder, the docs' Android snippet); it resolves the plugins and the test-scope libraries (the client
# itself has no dependencies) into ~/.m2: 22-27 s on an empty cache (22 MB fetched), 10-14 s after.
clients-java:
	mvn --batch-mode -q -f clients/java/pom.xml test

# The TypeScript client (clients/typescript): npm installs its one dev dependency (TypeScript) from the
# lockfile, tsc builds dist/ (which the browser test loads in Chromium), Node's test runner runs its
# tests (the shared test vectors, the chi-square tests). node_modules/ and dist/ are not committed.
TS := clients/typescript
TS_INSTALLED := $(TS)/node_modules/.installed

$(TS_INSTALLED): $(TS)/package.json $(TS)/package-lock.json
	cd $(TS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

clients-ts: $(TS_INSTALLED)
	cd $(TS) && npm run --silent build && node --test test/

# a Kafka broker on 127.0.0.1:9092 and the Flink job server on localhost:8099 (parallelism 2, with the
# Kafka IO expansion service on localhost:8097), Flink as a JobManager and TASKMANAGERS TaskManagers of
# their own (the 2 slots shared among them; TASKMANAGERS=2: one slot and one Python worker each, as
# deployed), where a job stopped with Ctrl-C resumes; FLINK=local runs Flink inside the job server instead
# (jobs start quicker; nothing resumes). The default is deploy/local/cluster.py's (DEFAULT_FLINK).
# cluster-down stops them by process id
FLINK ?=
TASKMANAGERS ?= 1
cluster-up: $(STAMP) jvm
	$(PY) -m deploy.local.cluster up $(if $(FLINK),--flink $(FLINK)) --taskmanagers $(TASKMANAGERS)

cluster-down: $(STAMP)
	$(PY) -m deploy.local.cluster down

# Hypothesis derandomized (tests/conftest.py's "ci" profile): CI (.ci/run) runs exactly this. The suite runs
# in TEST_WORKERS pytest-xdist processes (README, Tests): a test module to one (--dist loadfile), the tests of
# each of tests/cluster/'s two clusters to one, so each cluster starts once, and those first (tests/conftest.py),
# so that two processes wait on the clusters' watermarks while the third runs the CPU-bound modules.
# TEST_WORKERS=0 runs it in this one process.
TEST_WORKERS ?= 3
test: $(STAMP) $(CHROMEDRIVER) jvm clients-java clients-ts
	$(PY) -m pytest --hypothesis-profile=ci -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

demo: $(STAMP)
	$(VENV)/bin/ldp-marginals demo --out out/demo

# the peer libraries of goal 6 go into the same environment, only for `make bench`
$(BENCH): $(STAMP)
	$(QUIET_BUILD) $(PY) -m pip install --quiet -c $(PINS) -e ".[test,collect,bench]"
	touch $(BENCH)

# the collector's benchmark builds its load generator (benchmarks/loadgen, Go's standard library only,
# no module to fetch) with the machine's `go` into build/loadgen
bench: $(BENCH) jvm
	@command -v go >/dev/null || { echo "make bench needs Go (go build of benchmarks/loadgen)"; exit 1; }
	$(PY) -m benchmarks.run

clean:
	rm -rf $(VENV) $(JVM) .pytest_cache build *.egg-info clients/java/target $(TS)/node_modules $(TS)/dist
