# Serving evaluation: the two set-up commands are `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha256sum requirements.txt | cut -c1-16)
export AIRFLOW_HOME ?= $(CURDIR)/.airflow
export AIRFLOW__CORE__LOAD_EXAMPLES := False
export AIRFLOW__CORE__DAGS_FOLDER := $(CURDIR)/dags
export AIRFLOW__CORE__PLUGINS_FOLDER := $(CURDIR)/plugins
export PYTHONPATH := $(CURDIR)
export GX_ANALYTICS_ENABLED := false

.PHONY: venv demo test test-fast lint airflow benchmarks clean engine engine-stop images compose-env

venv: $(STAMP)

# uv installs the requirements (pinned there), with pip's package sources: tasks/runtimes/venvs.py, as the runtimes
$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(shell grep -oE '^uv==[0-9.]+' requirements.txt)
	$(PY) -m tasks.runtimes.venvs $(PY) requirements.txt
	rm -f $(VENV)/.installed-* && touch $(STAMP)

## demo: run the nightly DAG once (airflow dags test, SQLite, embedded S3) and print a summary
demo: venv
	$(PY) -m tasks.cli demo

## test: the whole suite (unit, integration against real servers and containers, real DAG runs, moto S3), with a
## Docker engine for its length: started when none answers (and stopped by its PID after), images built or reused
## (in the background while the tests that need none run: tests/prebuild.py)
test: venv lint
	SERVING_EVAL_PREBUILD=1 $(PY) -m tasks.cli engine run -- $(PY) -m pytest -q -ra tests

test-fast: venv
	$(PY) -m pytest -q -ra -m "not integration and not slow" tests

## lint: ruff, and vulture for names nothing uses (a use anywhere counts; vulture_whitelist.py: what frameworks call)
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/vulture tasks dags plugins benchmarks docker tests vulture_whitelist.py

## engine: install Docker (Debian's docker.io) and debootstrap when missing, start dockerd unless an engine answers
engine: venv
	docker/install-engine.sh
	$(PY) -m tasks.cli engine start

## engine-stop: stop the dockerd that `make engine` started (by its recorded PID; an engine started otherwise stays)
engine-stop: venv
	$(PY) -m tasks.cli engine stop

## images: build (or reuse) the serving runtimes' images on the project's Debian base (an engine for its length)
images: venv
	$(PY) -m tasks.cli engine run -- $(PY) -m tasks.cli images build

## compose-env: build (or reuse) the deployment's images (airflow, postgres, redis) and write docker/compose.env
compose-env: venv
	$(PY) -m tasks.cli engine run -- $(PY) -m tasks.cli images compose-env

## airflow: the Airflow UI on http://127.0.0.1:8080 with the DAG loaded (see README: log-in, trigger form)
airflow: venv
	$(PY) -m tasks.cli airflow

benchmarks: venv
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .airflow .pytest_cache .ruff_cache
