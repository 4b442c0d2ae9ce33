# deltaweb: `make run` starts everything, `make test` runs the whole suite.
# Both install what is missing first (idempotent): a virtualenv with the pinned packages,
# and, when root on Debian, a Java 17 runtime and redis-server through apt-get.

VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
PORT ?= 8000
REDIS_PORT ?= 6379
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: install install-test system-deps test-deps run stack stack-down test test-faults test-postgres test-postgres-all test-cluster test-cluster-all test-connect lint bench bench-scale clean

install: system-deps $(STAMP)

install-test: install $(TEST_STAMP)

system-deps:
	@missing=""; \
	command -v java >/dev/null 2>&1 || missing="$$missing openjdk-17-jre-headless"; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing:$$missing"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing >/dev/null || \
	    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing >/dev/null; }; \
	  else \
	    echo "missing:$$missing -- run: sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

# scripts/install.sh: one line per step with its time, pip's progress, and a line every 5 s
# while pip installs; `make run` needs the project's own packages only, the tests their extra
$(STAMP): pyproject.toml
	@bash scripts/install.sh $(VENV)
	@touch $(STAMP)

$(TEST_STAMP): pyproject.toml $(STAMP)
	@bash scripts/install.sh $(VENV) test
	@touch $(TEST_STAMP)

run: install
	@bash scripts/run.sh $(PORT) $(REDIS_PORT)

# docker-compose.yml (with deploy/compose.stand-ins.yml: Debian's Redis and PostgreSQL, moto in
# MinIO's place; STAND_INS=0 for the third-party images) started with podman by the test suite's
# own runner (tests/deploy/stack.py): each service in the order of its depends_on, each condition
# waited for by having podman run the service's healthcheck. Debian's podman 4.3 cannot run the
# file under docker-compose: it has no systemd here to run healthchecks, so service_healthy never
# comes (docs/operations.md). Secrets: var/stack.env, made on the first run. The web on port 8000.
STAND_INS ?= 1
stack: install
	@$(PY) -m tests.deploy.stack up $(if $(filter 0,$(STAND_INS)),--no-stand-ins)

# the containers and network gone, the volumes (the database, the bucket) kept; VOLUMES=1 removes them
stack-down:
	@$(PY) -m tests.deploy.stack down $(if $(filter 1,$(VOLUMES)),--volumes)

# the browser tests drive Debian's Chromium; docker-compose validates the deployment file;
# podman builds and runs the image (scripts/image.sh; mmdebstrap makes its base from Debian's
# packages where docker.io cannot be reached);
# the Azure tests run against Azurite (npm); the PostgreSQL pass runs Debian's server
# (scripts/postgres.sh: private port and data directory under var/postgres)
test-deps:
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v docker-compose >/dev/null 2>&1 || missing="$$missing docker-compose"; \
	ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v podman >/dev/null 2>&1 || missing="$$missing podman"; \
	command -v mmdebstrap >/dev/null 2>&1 || missing="$$missing mmdebstrap"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing:$$missing"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing >/dev/null || \
	    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing >/dev/null; } || \
	    echo "could not install$$missing: the tests that need them will skip"; \
	  else \
	    echo "optional:$$missing -- sudo apt-get install -y$$missing (tests that need them skip)"; \
	  fi; \
	fi
	@# Azurite (the Azure Storage emulator, npm) under var/azurite for the Azure tests
	@command -v npm >/dev/null 2>&1 || { [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1 && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q npm >/dev/null; } || \
	  echo "optional: npm (sudo apt-get install -y npm) -- the Azure tests skip without Azurite"
	@command -v azurite-blob >/dev/null 2>&1 || test -x var/azurite/node_modules/.bin/azurite-blob || \
	  { command -v npm >/dev/null 2>&1 && npm install -s --prefix var/azurite --no-audit --no-fund azurite@3.35.0 >/dev/null; } || \
	  echo "could not install Azurite: the Azure tests skip"

# `make test`: the whole suite (SQLite, local Spark), then the engine-dependent web modules
# again on PostgreSQL, the Spark data jobs again on a standalone cluster and through a Spark
# Connect server (all skipped when PYTEST_ARGS picks tests), each pass in two processes (each its own test database, each its
# own application on the cluster). PostgreSQL pass (PG_SUITE): the modules whose subject is the
# database's behaviour: the job uniqueness rule and its migration, racing requests, concurrent
# owners and catalog writers, the sync's bulk INSERT, the worker's claims, the API's queries.
# Cluster pass (CLUSTER_SUITE): the cluster checks (executors without the driver's environment,
# another Python caught at session start, object-store tables read in the executors), then
# previews, change data and keyed row diffs with executors in other JVMs, compared with
# delta-rs as on the local master. Both are chosen to keep CI short; the whole suites run with
# `make test-postgres-all` (tests/web and tests/alerts) and `make test-cluster-all` (tests/spark
# but for two golden-table sweeps of the object-store module, CLUSTER_DESELECT: they check the
# data source's decoding, the same code on any master).
# two processes, each test module kept in one (module fixtures start servers once)
PYTEST_PARALLEL := -n 2 --dist loadfile
PG_SUITE := $(addprefix tests/web/,data/test_jobs_on_purpose.py sync/test_sync.py owner/test_owner_stress.py \
	owner/test_uc_api.py sync/test_worker.py pages/test_app_layer.py pages/test_api.py access/test_hot_queries.py \
	sync/test_sync_continued.py)
PG_SUITE_ALL := tests/web tests/alerts
CLUSTER_SUITE := $(addprefix tests/spark/,test_cluster.py test_changes.py test_rowdiff.py test_preview.py)
CLUSTER_SUITE_ALL := tests/spark
CLUSTER_DESELECT := $(addprefix tests/spark/test_objectstore_spark.py::,\
	test_the_datasource_route_reads_as_spark_reads_the_table_on_disk \
	test_a_version_read_on_spark_equals_deltars_on_the_bucket)

test: install-test test-deps
	@$(PY) -m pytest $(PYTEST_PARALLEL) --durations=15 $(PYTEST_ARGS)
	@if [ -z "$(PYTEST_ARGS)" ]; then $(MAKE) --no-print-directory test-postgres test-cluster test-connect; fi

# the fault-injection suite (tests/faults/, once per case in `make test`), each case 5 times
test-faults: install-test test-deps
	@DELTAWEB_FAULT_RUNS=$${DELTAWEB_FAULT_RUNS:-5} $(PY) -m pytest $(PYTEST_PARALLEL) tests/faults

test-postgres: install-test test-deps
	@url=$$(scripts/postgres.sh start) && echo "== web modules on PostgreSQL ($$url)" && \
	  DATABASE_URL=$$url $(PY) -m pytest $(PYTEST_PARALLEL) $(PG_SUITE)

test-postgres-all: PG_SUITE := $(PG_SUITE_ALL)
test-postgres-all: test-postgres

test-cluster: install-test test-deps
	@master=$$(scripts/spark-cluster.sh start) && echo "== Spark jobs on a standalone cluster ($$master)" && \
	  { SPARK_MASTER=$$master SPARK_CORES_MAX=1 $(PY) -m pytest $(PYTEST_PARALLEL) $(CLUSTER_SUITE) \
	      $(addprefix --deselect ,$(CLUSTER_DESELECT)); rc=$$?; \
	    scripts/spark-cluster.sh stop; exit $$rc; }

test-cluster-all: CLUSTER_SUITE := $(CLUSTER_SUITE_ALL)
test-cluster-all: test-cluster

# Connect pass (CONNECT_SUITE): the data jobs (previews, change data, keyed row diffs, compared
# with delta-rs as on the in-process session; a row's history, compared with the core's; SQL at a
# version, compared with DuckDB over delta-rs reads),
# cancelling, and the Connect checks (a server that does not answer, its token, confinement
# before the server runs anything, stages) through one Spark Connect server the tests start
# (tests/spark/conftest.py: scripts/spark_connect.sh, its own port, token and
# var/spark-connect-test), shared by both processes and stopped here.
CONNECT_SUITE := $(addprefix tests/spark/,test_connect.py test_cancel.py test_changes.py test_rowdiff.py test_preview.py \
	test_row_history_spark.py test_query.py)
CONNECT_DIR := var/spark-connect-test

test-connect: install-test test-deps
	@echo "== Spark jobs through a Spark Connect server" && \
	  { DELTAWEB_TEST_SPARK_CONNECT=1 $(PY) -m pytest $(PYTEST_PARALLEL) $(CONNECT_SUITE); rc=$$?; \
	    SPARK_CONNECT_DIR=$(CONNECT_DIR) scripts/spark_connect.sh stop; exit $$rc; }

lint: install-test
	@$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

# side-by-side benchmarks (minutes each; generated data under /tmp/deltaweb-bench and var/)
bench: install-test
	@$(PY) benchmarks/snapshot_load.py
	@$(PY) benchmarks/time_travel.py
	@command -v wrk >/dev/null 2>&1 || { [ "$$(id -u)" = "0" ] && apt-get install -y -q wrk >/dev/null; }
	@$(PY) benchmarks/web.py
	@$(PY) benchmarks/sync.py
	@$(PY) benchmarks/restore.py
	@$(PY) benchmarks/spark_rows.py --quick
	@$(PY) benchmarks/spark_connect.py
	@$(PY) benchmarks/owner.py
	@$(PY) benchmarks/load.py
	@$(PY) benchmarks/query.py

# the scale ones (about 25 and 5 minutes; a million-commit log and 100,000 tables under /tmp/deltaweb-bench)
bench-scale: install-test
	@command -v wrk >/dev/null 2>&1 || { [ "$$(id -u)" = "0" ] && apt-get install -y -q wrk >/dev/null; }
	@$(PY) benchmarks/million.py
	@$(PY) benchmarks/fleet.py --tables 100000
	@$(PY) benchmarks/objectstore.py --log /tmp/deltaweb-bench/time_travel/million --only none --reps 3 --no-serial

clean:
	rm -rf $(VENV) var
