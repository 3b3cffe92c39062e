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

.PHONY: venv demo test test-fast lint airflow benchmarks clean

venv: $(STAMP)

$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	rm -f $(VENV)/.installed-* && touch $(STAMP)

## demo: run the nightly DAG once (airflow dags test, SQLite, embedded S3) and print a summary
demo: venv
	$(PY) -m tasks.cli demo

## test: the whole suite (unit, integration against real servers, real DAG runs, moto S3)
test: venv lint
	$(PY) -m pytest -q -ra tests

test-fast: venv
	$(PY) -m pytest -q -ra -m "not integration and not slow" tests

lint: venv
	$(VENV)/bin/ruff check .

## airflow: the Airflow UI on http://127.0.0.1:8080 with the DAG loaded (see README: log-in, trigger form)
airflow: venv
	$(PY) -m tasks.cli airflow

benchmarks: venv
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .airflow .pytest_cache .ruff_cache
